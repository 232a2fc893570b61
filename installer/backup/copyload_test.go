package backup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testArchive writes a custom-format archive as pg_dump does to a pipe (the layout of
// archive.go), so that the versions this machine's pg_dump does not write are read too.
type testArchive struct {
	b       bytes.Buffer
	version archiveVersion
}

type testEntry struct {
	id                                   int
	hadDumper                            bool
	namespace, tag, desc, defn, copyStmt string
	section                              int
}

func (a *testArchive) int(n int) {
	sign := byte(0)
	if n < 0 {
		sign, n = 1, -n
	}
	a.b.WriteByte(sign)
	a.b.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
}

// str writes s; "" is written as NULL.
func (a *testArchive) str(s string) {
	if s == "" {
		a.int(-1)
		return
	}
	a.int(len(s))
	a.b.WriteString(s)
}

func newTestArchive(version archiveVersion, compressed bool, entries []testEntry) *testArchive {
	a := &testArchive{version: version}
	a.b.WriteString("PGDMP")
	a.b.Write(version[:])
	a.b.Write([]byte{4, 8, 1})
	switch {
	case version.atLeast(15) && compressed:
		a.b.WriteByte(3) // zstd
	case version.atLeast(15):
		a.b.WriteByte(0)
	case compressed:
		a.int(-1)
	default:
		a.int(0)
	}
	for _, n := range []int{7, 5, 21, 29, 10, 126, 0} {
		a.int(n)
	}
	a.str("polyaxon")
	a.str("15.18")
	a.str("15.18")
	a.int(len(entries))
	for _, e := range entries {
		a.int(e.id)
		a.int(map[bool]int{true: 1}[e.hadDumper])
		a.str("0")
		a.str("16385")
		a.str(e.tag)
		a.str(e.desc)
		a.int(e.section)
		a.str(e.defn)
		a.str("")
		a.str(e.copyStmt)
		a.str(e.namespace)
		a.str("")
		a.str("heap")
		if version.atLeast(16) {
			a.int('r') // a relkind, read as a string's length where it is not expected
		}
		a.str("polyaxon")
		a.str("false")
		a.str("1") // a dependency on an earlier entry, as pg_restore wants for TABLE DATA
		a.str("")
		a.b.WriteByte(map[bool]byte{true: 1, false: 3}[e.hadDumper])
		a.b.Write(make([]byte, 8))
	}
	return a
}

// block writes an entry's data, a chunk per row, and the end line pg_dump writes after them.
func (a *testArchive) block(id int, rows ...string) {
	a.b.WriteByte(blockData)
	a.int(id)
	for _, r := range append(rows, "\\.\n\n\n") {
		a.int(len(r))
		a.b.WriteString(r)
	}
	a.int(0)
}

// oddTable is a stream's table whose names pg_dump quotes, and the entries of its archive.
const oddTable = `Odd.we"ird`

func oddEntries(copyStmt, setval string) []testEntry {
	return []testEntry{
		{id: 3348, desc: "ENCODING", tag: "ENCODING", section: 2, defn: "SET client_encoding = 'UTF8';\n"},
		{id: 3349, desc: "STDSTRINGS", tag: "STDSTRINGS", section: 2, defn: "SET standard_conforming_strings = 'on';\n"},
		{id: 3351, desc: "DATABASE", tag: "polyaxon", section: 2, defn: "CREATE DATABASE polyaxon;\n"},
		{id: 3344, hadDumper: true, desc: "TABLE DATA", namespace: "Odd", tag: `we"ird`, section: sectionData, copyStmt: copyStmt},
		{id: 3353, desc: "SEQUENCE SET", namespace: "Odd", tag: "s", section: sectionData, defn: setval},
	}
}

const (
	oddCopy   = "COPY \"Odd\".\"we\"\"ird\" (id, \"Odd Col\") FROM stdin;\n"
	oddSetval = "SELECT pg_catalog.setval('\"Odd\".\"seq'' s\"', 41, true);\n"
)

// oddDatabase makes a new database holding the odd table (empty) and a table named victim.
func oddDatabase(t *testing.T, name string) *LocalTarget {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, name))
	_, err := s.Psql(ctx, name, `CREATE SCHEMA "Odd"; CREATE TABLE "Odd"."we""ird" (id int, "Odd Col" text);
CREATE SEQUENCE "Odd"."seq' s"; CREATE TABLE public.victim (id int); INSERT INTO public.victim VALUES (1);`)
	require.NoError(t, err)
	return localTarget(s, name, s.BinDir)
}

func TestCopyLoadReadsEveryArchiveVersionItKnows(t *testing.T) {
	ctx := context.Background()
	for _, minor := range []byte{14, 15, 16} {
		version := archiveVersion{1, minor, 0}
		t.Run(version.String(), func(t *testing.T) {
			name := "copyload_" + strings.ReplaceAll(version.String(), ".", "_")
			name = strings.ReplaceAll(name, "-", "_")
			db := oddDatabase(t, name)
			a := newTestArchive(version, false, oddEntries(oddCopy, oddSetval))
			a.block(3344, "1\ta\\tb\\\\c\\nd\n", "2\t\\N\n", "3\t\\\\.\n")
			var rows map[string]int64
			var logs bytes.Buffer
			load := copyLoad{db: db, frozen: map[string]string{oddTable: ""}, log: testLogger(&logs),
				loaded: func(r map[string]int64) { rows = r }}.tool([]string{oddTable})
			require.NoError(t, load(ctx, iotest.OneByteReader(bytes.NewReader(a.b.Bytes())), io.Discard), logs.String())
			assert.Equal(t, map[string]int64{oddTable: 3}, rows)
			s, _ := sharedServer(t)
			got, err := s.Psql(ctx, name, `SELECT string_agg(format('%s=%s', id, coalesce("Odd Col", 'NULL')), '|' ORDER BY id) FROM "Odd"."we""ird";
SELECT last_value FROM "Odd"."seq' s";`)
			require.NoError(t, err)
			assert.Equal(t, "1=a\tb\\c\nd|2=NULL|3=\\.\n41", got)
		})
	}
}

// What our process does not read is left to pg_restore before any of it is loaded.
func TestCopyLoadLeavesOtherArchivesToPgRestore(t *testing.T) {
	ctx := context.Background()
	db := oddDatabase(t, "copyload_fallback")
	withBlob := append(oddEntries(oddCopy, oddSetval), testEntry{id: 3360, hadDumper: true, desc: "BLOBS", tag: "BLOBS", section: sectionData})
	viaRoot := oddEntries(oddCopy, oddSetval)
	viaRoot[3].defn = "-- load via partition root \"Odd\".\"parent\"\n"
	archives := map[string]*testArchive{
		"an older version":           newTestArchive(archiveVersion{1, 13, 0}, false, oddEntries(oddCopy, oddSetval)),
		"a newer version":            newTestArchive(archiveVersion{1, 17, 0}, false, oddEntries(oddCopy, oddSetval)),
		"compressed, 1.14":           newTestArchive(archiveVersion{1, 14, 0}, true, oddEntries(oddCopy, oddSetval)),
		"compressed, 1.15":           newTestArchive(archiveVersion{1, 15, 0}, true, oddEntries(oddCopy, oddSetval)),
		"large objects":              newTestArchive(archiveVersion{1, 14, 0}, false, withBlob),
		"INSERT statements":          newTestArchive(archiveVersion{1, 14, 0}, false, oddEntries("", oddSetval)),
		"through its partition root": newTestArchive(archiveVersion{1, 14, 0}, false, viaRoot),
	}
	for name, a := range archives {
		t.Run(name, func(t *testing.T) {
			a.block(3344, "1\tx\n")
			load := copyLoad{db: db, frozen: map[string]string{oddTable: ""}, log: testLogger(&bytes.Buffer{})}.tool([]string{oddTable})
			err := load(ctx, bytes.NewReader(a.b.Bytes()), io.Discard)
			var elsewhere *loadByPgRestore
			require.ErrorAs(t, err, &elsewhere)
			assertOddTableEmpty(t, "copyload_fallback")
		})
	}
	t.Run("the programs' environment", func(t *testing.T) {
		withEnv := *db
		withEnv.env = []string{"PGOPTIONS=-c search_path=evil"}
		a := newTestArchive(archiveVersion{1, 14, 0}, false, oddEntries(oddCopy, oddSetval))
		a.block(3344, "1\tx\n")
		err := copyLoad{db: &withEnv, log: testLogger(&bytes.Buffer{})}.tool([]string{oddTable})(ctx, bytes.NewReader(a.b.Bytes()), io.Discard)
		var elsewhere *loadByPgRestore
		require.ErrorAs(t, err, &elsewhere)
	})
}

func assertOddTableEmpty(t *testing.T, db string) {
	t.Helper()
	s, _ := sharedServer(t)
	got, err := s.Psql(context.Background(), db, `SELECT (SELECT count(*) FROM public.victim) || ' ' || (SELECT count(*) FROM "Odd"."we""ird")`)
	require.NoError(t, err)
	assert.Equal(t, "1 0", got, "the victim table is as it was and nothing was loaded")
}

// An altered archive's names and statements never run as SQL: what is not the way pg_dump
// writes them is refused, nothing is loaded, and pg_restore is not asked either.
func TestCopyLoadRefusesAlteredStatements(t *testing.T) {
	ctx := context.Background()
	db := oddDatabase(t, "copyload_hostile")
	twice := append(oddEntries(oddCopy, oddSetval), testEntry{id: 3345, hadDumper: true, desc: "TABLE DATA", namespace: "Odd", tag: `we"ird`, section: sectionData, copyStmt: oddCopy})
	for name, entries := range map[string][]testEntry{
		"a table's data twice":       twice,
		"data listed, not there":     append(oddEntries(oddCopy, oddSetval), testEntry{id: 3346, hadDumper: true, desc: "TABLE DATA", namespace: "Odd", tag: "other", section: sectionData, copyStmt: "COPY \"Odd\".other (a) FROM stdin;\n"}),
		"a statement after the COPY": oddEntries("COPY \"Odd\".\"we\"\"ird\" (id) FROM stdin; DROP TABLE public.victim;\n", oddSetval),
		"a statement in the columns": oddEntries("COPY \"Odd\".\"we\"\"ird\" (id) FROM stdin; DROP TABLE public.victim; -- ) FROM stdin;\n", oddSetval),
		"COPY from a program":        oddEntries("COPY \"Odd\".\"we\"\"ird\" (id) FROM PROGRAM 'touch /tmp/owned';\n", oddSetval),
		"another table's COPY":       oddEntries("COPY public.victim (id) FROM stdin;\n", oddSetval),
		"a statement in setval":      oddEntries(oddCopy, "SELECT pg_catalog.setval('x', 1, true); DROP TABLE public.victim;\n"),
		"a statement as encoding":    append(oddEntries(oddCopy, oddSetval), testEntry{id: 1, desc: "ENCODING", section: 2, defn: "SET client_encoding = 'UTF8'; DROP TABLE public.victim;\n"}),
		"a table of another stream": {
			{id: 3348, desc: "ENCODING", tag: "ENCODING", section: 2, defn: "SET client_encoding = 'UTF8';\n"},
			{id: 3344, hadDumper: true, desc: "TABLE DATA", namespace: "public", tag: "victim", section: sectionData, copyStmt: "COPY public.victim (id) FROM stdin;\n"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := newTestArchive(archiveVersion{1, 14, 0}, false, entries)
			a.block(3344, "7\tx\n") // a row the table takes
			load := copyLoad{db: db, frozen: map[string]string{oddTable: ""}, log: testLogger(&bytes.Buffer{})}.tool([]string{oddTable, `Odd.other`})
			err := load(ctx, bytes.NewReader(a.b.Bytes()), io.Discard)
			require.Error(t, err)
			var elsewhere *loadByPgRestore
			assert.False(t, errors.As(err, &elsewhere), "not left to pg_restore either: %v", err)
			assertOddTableEmpty(t, "copyload_hostile")
		})
	}
}

func TestCopyColumnsReadsBackWhatPgDumpQuoted(t *testing.T) {
	cols, err := copyColumns(oddCopy, "Odd", `we"ird`)
	require.NoError(t, err)
	assert.Equal(t, []string{"id", "Odd Col"}, cols)
	cols, err = copyColumns("COPY public.nocols  FROM stdin;\n", "public", "nocols")
	require.NoError(t, err)
	assert.Empty(t, cols)
	cols, err = copyColumns("COPY public.t (\"a, b\", \"c\"\") FROM\", \"user\") FROM stdin;\n", "public", "t")
	require.NoError(t, err)
	assert.Equal(t, []string{"a, b", `c") FROM`, "user"}, cols)
	for _, stmt := range []string{
		"COPY public.t (a) FROM stdin;",         // no newline
		"COPY public.t (a) TO stdout;\n",        // not a load
		"COPY public.t (A) FROM stdin;\n",       // pg_dump quotes upper case
		"COPY public.t () FROM stdin;\n",        // no column
		"COPY public.t (\"\") FROM stdin;\n",    // an empty name
		"COPY public.t (\"a) FROM stdin;\n",     // unterminated quote
		"COPY public.t (a) FROM stdin;\n\\! id", // anything after
	} {
		_, err := copyColumns(stmt, "public", "t")
		assert.Error(t, err, "%q", stmt)
	}
}

func TestCopyRowsDropsOnlyTheEndLine(t *testing.T) {
	for in, want := range map[string]string{
		"1\n2\n\\.\n\n\n": "1\n2\n",
		"\\.\n\n\n":       "",
		"\\.\n":           "",
		"":                "",
		"1\n\\.\n":        "1\n",
		"a\\.\n":          "a\\.\n", // a value's end, not a line
		"1\n\\.\n\n":      "1\n\\.\n\n",
		strings.Repeat("row\n", 40) + "\\.\n\n\n": strings.Repeat("row\n", 40),
	} {
		for _, size := range []int{7, 16, 256 << 10} {
			r := &copyRows{src: iotest.OneByteReader(strings.NewReader(in)), buf: make([]byte, size)}
			got, err := io.ReadAll(iotest.OneByteReader(r))
			require.NoError(t, err)
			assert.Equal(t, want, string(got), "%q with a buffer of %d", in, size)
		}
	}
}

// A stream's archive replaced by one our process leaves to pg_restore, whose data are SQL (as
// with --inserts): pg_restore would print them and psql run them. The archive's sha256 is
// checked first, so they never run.
func TestStreamsAlteredArchiveForPgRestoreRunsNothing(t *testing.T) {
	ctx := context.Background()
	s, m, _ := streamsBackup(t, "streams_sql", WithCompression(CodecNone, 0), WithDumpCompression("0"))
	target, before := streamsTarget(t, s, "streams_sql_dst")
	schema, name, _ := strings.Cut(m.Streams[1].Tables[0], ".")
	a := newTestArchive(archiveVersion{1, 14, 0}, false, []testEntry{
		{id: 1, desc: "ENCODING", tag: "ENCODING", section: 2, defn: "SET client_encoding = 'UTF8';\n"},
		{id: 2, hadDumper: true, desc: "TABLE DATA", namespace: schema, tag: name, section: sectionData},
	})
	a.b.WriteByte(blockData)
	a.int(2)
	// As long as the file it replaces: only its sha256 tells them apart.
	payload := "CREATE ROLE owned_by_dump;\n-- "
	payload += strings.Repeat("x", int(m.Streams[1].Size)-a.b.Len()-5-len(payload)-5-1) + "\n"
	a.int(len(payload))
	a.b.WriteString(payload)
	a.int(0)
	require.EqualValues(t, m.Streams[1].Size, a.b.Len())
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, m.Streams[1].File), a.b.Bytes(), 0o600))

	_, err := Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir))
	require.ErrorIs(t, err, ErrChecksum)
	roles, err := s.Psql(ctx, "postgres", "SELECT count(*) FROM pg_roles WHERE rolname = 'owned_by_dump'")
	require.NoError(t, err)
	assert.Equal(t, "0", roles, "the archive's SQL did not run")
	got, err := pgtest.Checksums(ctx, s, target.conn.Database)
	require.NoError(t, err)
	assert.Equal(t, before, got)
	assertNoScratchLeft(t, s, target.conn.Database)
}

// Streams that pg_dump compressed are pg_restore's: each is loaded once its sha256 matched, and
// the restored database is the source.
func TestStreamsCompressedByPgDumpAreLoadedByPgRestore(t *testing.T) {
	ctx := context.Background()
	s, m, want := streamsBackup(t, "streams_gz", WithDumpCompression("1"))
	target, _ := streamsTarget(t, s, "streams_gz_dst")
	var logs bytes.Buffer
	_, err := Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), WithLogger(testLogger(&logs)))
	require.NoError(t, err, logs.String())
	assert.Equal(t, len(m.Streams)-1, strings.Count(logs.String(), "loaded by pg_restore, once its sha256 is checked"))
	assert.NotContains(t, logs.String(), "loaded by COPY")
	got, err := pgtest.Checksums(ctx, s, target.conn.Database)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
