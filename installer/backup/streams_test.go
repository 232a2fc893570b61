package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

func TestPlanStreams(t *testing.T) {
	mib := int64(1 << 20)
	tables := []streamTable{
		{"public", "small", mib / 2}, {"public", "a", 40 * mib}, {"public", "b", 30 * mib},
		{"public", "c", 20 * mib}, {"public", "d", 10 * mib},
	}
	// Largest first into the stream with the least data: {a} {b} {c, d}; the small table stays
	// with the schema.
	got := planStreams(tables, 3)
	names := func(s []streamTable) (out []string) {
		for _, t := range s {
			out = append(out, t.Name)
		}
		return out
	}
	require.Len(t, got, 3)
	assert.Equal(t, []string{"a"}, names(got[0]))
	assert.Equal(t, []string{"b"}, names(got[1]))
	assert.Equal(t, []string{"c", "d"}, names(got[2]))
	assert.Nil(t, planStreams(tables, 1))
	assert.Len(t, planStreams(tables[:2], 4), 1, "one large table: one stream of its own")

	assert.Equal(t, 1, defaultStreams(cores(8), []streamTable{{"p", "x", 10 * mib}}), "a small database")
	assert.Equal(t, 2, defaultStreams(cores(1), tables[1:]), "twice the cores")
	assert.Equal(t, 4, defaultStreams(cores(2), tables[1:]))
	assert.Equal(t, 4, defaultStreams(cores(64), tables[1:]), "at most 4")
}

func cores(n int) func() int { return func() int { return n } }

func TestStreamTablePattern(t *testing.T) {
	assert.Equal(t, `"public"."runs"`, streamTable{Schema: "public", Name: "runs"}.pattern())
	assert.Equal(t, `"My Schema"."we""ird.*?"`, streamTable{Schema: "My Schema", Name: `we"ird.*?`}.pattern())
}

// streamsBackup seeds db on the shared server, with two tables whose names would be patterns
// but for pg_dump's quotes (one of them referencing runs, the other with a trigger), and backs it up in three streams of
// data beside the schema's.
func streamsBackup(t *testing.T, db string, opts ...CreateOption) (*pgtest.Server, *Manifest, map[string]string) {
	t.Helper()
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, db))
	require.NoError(t, pgtest.Seed(ctx, s, db, pgtest.SeedSpec{Runs: 6000}))
	_, err := s.Psql(ctx, db, `CREATE SCHEMA "Odd";
CREATE TABLE "Odd"."we""ird.*?" (id bigint PRIMARY KEY, run_id bigint REFERENCES public.runs(id), body text);
INSERT INTO "Odd"."we""ird.*?" SELECT i, i, repeat(md5(i::text), 20) FROM generate_series(1, 4000) i;
ALTER TABLE "Odd"."we""ird.*?" ADD CONSTRAINT "not ""yet"" valid" FOREIGN KEY (id) REFERENCES public.runs(id) NOT VALID;
CREATE TABLE "Odd".weird (id bigint);
CREATE FUNCTION "Odd".touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER weird_touch BEFORE INSERT ON "Odd".weird FOR EACH ROW EXECUTE FUNCTION "Odd".touch();`)
	require.NoError(t, err)
	want, err := pgtest.Checksums(ctx, s, db)
	require.NoError(t, err)
	m, err := Create(ctx, localTarget(s, db, s.BinDir), append([]CreateOption{WithOutputDir(t.TempDir()), WithDumpJobs(3),
		WithRelease(ReleaseInfo{Name: "polyaxon", Namespace: "ns1", AppVersion: "2.15.1"})}, opts...)...)
	require.NoError(t, err)
	require.Len(t, m.Streams, 4, "the schema's stream and three of data: %+v", m.Streams)
	return s, m, want
}

// A dump in streams restores both ways to the same contents, verifies, lists and checksums;
// its manifest says which stream carries which table's data.
func TestStreamsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, m, want := streamsBackup(t, "streams_src")
	wantSchema, err := pgtest.SchemaObjects(ctx, s, "streams_src")
	require.NoError(t, err)
	require.NotEmpty(t, wantSchema)
	assert.Equal(t, FormatVersionStreams, m.FormatVersion)
	assert.Equal(t, "4 parallel streams", m.Layout())
	assert.Equal(t, m.Streams[0].File, m.DumpFile)
	var size int64
	var streamed []string
	for i, p := range m.Streams {
		st, err := os.Stat(filepath.Join(m.Dir, p.File))
		require.NoError(t, err)
		assert.Equal(t, st.Size(), p.Size)
		assert.Len(t, p.SHA256, 64)
		size += p.Size
		if i > 0 {
			assert.NotEmpty(t, p.Tables)
		}
		streamed = append(streamed, p.Tables...)
	}
	assert.Equal(t, size, m.DumpSize)
	assert.Contains(t, streamed, `Odd.we"ird.*?`)
	assert.NotContains(t, streamed, "Odd.weird", "an empty table stays in the first stream")
	onDisk, err := ReadManifest(m.Dir)
	require.NoError(t, err)
	assert.Equal(t, m, onDisk)
	assert.NotEmpty(t, m.Rows)

	rep, err := Verify(ctx, m.Dir, WithToolsDir(s.BinDir), WithFullCheck())
	require.NoError(t, err)
	assert.Contains(t, rep.Tables, "public.runs")
	assert.GreaterOrEqual(t, rep.TableData, len(pgtest.Tables)+1)
	require.NoError(t, Checksum(ctx, m.Dir))
	list, err := List(filepath.Dir(m.Dir))
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "4 parallel streams", list[0].Manifest.Layout())

	require.NoError(t, s.CreateDatabase(ctx, "streams_dst"))
	target := localTarget(s, "streams_dst", s.BinDir)
	var logs bytes.Buffer
	rr, err := Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), WithLogger(testLogger(&logs)))
	require.NoError(t, err, logs.String())
	assert.Equal(t, RestoredBySwap, rr.Way)
	assert.Contains(t, logs.String(), "checkpoint taken", "the restored copy is written out before the swap")
	assert.Equal(t, len(m.Streams)-1, strings.Count(logs.String(), "loaded by COPY"), "every stream's archive but the schema's is loaded by our process")
	assert.NotContains(t, logs.String(), "loaded by pg_restore")
	got, err := pgtest.Checksums(ctx, s, "streams_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for table, n := range m.Rows {
		assert.Equal(t, n, rr.Rows[table], table)
	}
	// The streamed tables' rows were written frozen: every page of them is all-frozen in the
	// visibility map, so that nothing rewrites them for hint bits or for a wraparound vacuum.
	frozen, err := s.Psql(ctx, "streams_dst", `CREATE EXTENSION pg_visibility;
SELECT string_agg(format('%s %s/%s', t, (pg_visibility_map_summary(t)).all_frozen, pg_relation_size(t) / 8192), ', ' ORDER BY t)
FROM unnest(ARRAY['public.runs', 'public.metrics', 'public.artifacts', '"Odd"."we""ird.*?"']::regclass[]) t;
DROP EXTENSION pg_visibility;`)
	require.NoError(t, err)
	for _, table := range strings.Split(frozen, ", ") {
		f := strings.Fields(table)
		require.Len(t, f, 2, frozen)
		done, all, _ := strings.Cut(f[1], "/")
		assert.Equal(t, all, done, "pages of %s all-frozen (of its pages): %s", f[0], frozen)
		assert.NotEqual(t, "0", all, "%s has pages", f[0])
	}
	// Every index and constraint, whether built as its stream's data came in or at the end.
	gotSchema, err := pgtest.SchemaObjects(ctx, s, "streams_dst")
	require.NoError(t, err)
	assert.Equal(t, wantSchema, gotSchema)

	// Over a changed database, in one transaction: the same contents again.
	_, err = s.Psql(ctx, "streams_dst", `DELETE FROM metrics WHERE id % 7 = 0; UPDATE runs SET status = 'x' WHERE id < 100; DROP TABLE artifacts;`)
	require.NoError(t, err)
	rr, err = Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), WithJobs(1))
	require.NoError(t, err)
	assert.Equal(t, RestoredInOneTransaction, rr.Way)
	got, err = pgtest.Checksums(ctx, s, "streams_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	gotSchema, err = pgtest.SchemaObjects(ctx, s, "streams_dst")
	require.NoError(t, err)
	assert.Equal(t, wantSchema, gotSchema)

	// By swap, as a role that owns the database and may create databases but is no superuser:
	// the server refuses it a checkpoint, and the drop of the replaced database writes the
	// restored copy out instead.
	_, err = s.Psql(ctx, "postgres", `CREATE ROLE dbowner LOGIN PASSWORD 'dbowner-pw' CREATEDB NOSUPERUSER; ALTER DATABASE streams_dst OWNER TO dbowner`)
	require.NoError(t, err)
	owner := NewLocalTarget(Conn{Host: s.Host, Port: s.Port, User: "dbowner", Database: "streams_dst", Password: "dbowner-pw"}, WithLocalBinDir(s.BinDir))
	// The checks above end their psql sessions before this; on a loaded machine a backend
	// may still be leaving, and a database in use is restored in place, not swapped.
	require.Eventually(t, func() bool {
		n, err := s.Psql(ctx, "postgres", `SELECT count(*) FROM pg_stat_activity WHERE datname = 'streams_dst'`)
		return err == nil && strings.TrimSpace(n) == "0"
	}, 30*time.Second, 100*time.Millisecond, "the checks' sessions on streams_dst ended")
	logs.Reset()
	rr, err = Restore(ctx, owner, m.Dir, WithToolsDir(s.BinDir), WithLogger(testLogger(&logs)))
	require.NoError(t, err, logs.String())
	assert.Equal(t, RestoredBySwap, rr.Way)
	assert.Contains(t, logs.String(), "no checkpoint before the swap")
	got, err = pgtest.Checksums(ctx, s, "streams_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// An older polyaxon-deploy must not restore the first stream alone: the manifest's version
// keeps it out, and a manifest that claims one archive while listing streams is refused.
func TestStreamsManifestVersion(t *testing.T) {
	_, m, _ := streamsBackup(t, "streams_version")
	b, err := os.ReadFile(filepath.Join(m.Dir, ManifestFile))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.EqualValues(t, 2, doc["formatVersion"])
	doc["formatVersion"] = 1
	b, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, ManifestFile), b, 0o600))
	_, err = ReadManifest(m.Dir)
	require.ErrorContains(t, err, "formatVersion 1 and 4 streams")
}

// rewriteStreamsManifest makes the manifest agree with damaged stream files, so that only the
// codec's own checks or pg_restore can catch the damage.
func rewriteStreamsManifest(t *testing.T, dir string) {
	t.Helper()
	m, err := ReadManifest(dir)
	require.NoError(t, err)
	for i, p := range m.Streams {
		b, err := os.ReadFile(filepath.Join(dir, p.File))
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		m.Streams[i].SHA256, m.Streams[i].Size = hex.EncodeToString(sum[:]), int64(len(b))
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600))
}

// streamsTarget is a database with other contents than the backup's, and its checksums.
func streamsTarget(t *testing.T, s *pgtest.Server, db string) (*LocalTarget, map[string]string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.CreateDatabase(ctx, db))
	require.NoError(t, pgtest.Seed(ctx, s, db, pgtest.SeedSpec{Runs: 300}))
	before, err := pgtest.Checksums(ctx, s, db)
	require.NoError(t, err)
	return localTarget(s, db, s.BinDir), before
}

// A digit changed near the end of a data stream, which pg_restore accepts: only the sha256
// stands in the way, and it is checked before anything is committed, either way.
func TestStreamsTamperedTailCommitsNothing(t *testing.T) {
	bothWays(t, func(t *testing.T, name string, way RestoreOption) {
		ctx := context.Background()
		s, m, want := streamsBackup(t, "streams_tail_"+name, WithCompression(CodecNone, 0), WithDumpCompression("0"))
		target, before := streamsTarget(t, s, "streams_tail_dst_"+name)
		dump := filepath.Join(m.Dir, m.Streams[1].File)
		b, err := os.ReadFile(dump)
		require.NoError(t, err)
		i := len(b) - 1
		for ; i > len(b)-4096; i-- {
			if b[i] >= '1' && b[i] <= '8' {
				break
			}
		}
		require.Greater(t, i, len(b)-4096, "no digit in the last bytes of the stream")
		b[i]++
		require.NoError(t, os.WriteFile(dump, b, 0o600))

		sc := &fakeScaler{}
		_, err = Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), WithScaler(sc), way)
		require.ErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), m.Streams[1].File)
		assert.Regexp(t, "nothing was committed|is unchanged", err.Error())
		assert.Equal(t, sc.downs, sc.ups, "writers scaled back")
		got, err := pgtest.Checksums(ctx, s, target.conn.Database)
		require.NoError(t, err)
		assert.Equal(t, before, got, "the target database is unchanged")
		assertNoScratchLeft(t, s, target.conn.Database)

		// With a manifest that agrees, the altered digit is restored: only the sha256 stood
		// in the way.
		rewriteStreamsManifest(t, m.Dir)
		_, err = Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), way)
		require.NoError(t, err)
		got, err = pgtest.Checksums(ctx, s, target.conn.Database)
		require.NoError(t, err)
		assert.NotEqual(t, before, got)
		assert.NotEqual(t, want, got, "the altered digit was restored")
	})
}

// A damaged end of a stream, with a manifest that agrees: S2's block checksum catches it, and
// nothing is committed either way.
func TestStreamsDamagedCodecTailCommitsNothing(t *testing.T) {
	bothWays(t, func(t *testing.T, name string, way RestoreOption) {
		ctx := context.Background()
		s, m, _ := streamsBackup(t, "streams_codec_"+name)
		target, before := streamsTarget(t, s, "streams_codec_dst_"+name)
		last := m.Streams[len(m.Streams)-1]
		flipByte(t, filepath.Join(m.Dir, last.File), last.Size-2)
		rewriteStreamsManifest(t, m.Dir)
		_, err := Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), way)
		require.ErrorIs(t, err, ErrUnreadable)
		assert.Regexp(t, "nothing was committed|is unchanged", err.Error())
		got, err := pgtest.Checksums(ctx, s, target.conn.Database)
		require.NoError(t, err)
		assert.Equal(t, before, got)
		assertNoScratchLeft(t, s, target.conn.Database)
	})
}

// Verify, Checksum and List find damage in any stream: a flipped byte, a truncated file, a
// missing one.
func TestStreamsVerifyRejectsDamage(t *testing.T) {
	ctx := context.Background()
	s, m, _ := streamsBackup(t, "streams_damage")
	last := m.Streams[3]
	t.Run("flipped byte", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		flipByte(t, filepath.Join(dir, last.File), last.Size/2)
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), last.File)
		require.ErrorIs(t, Checksum(ctx, dir), ErrChecksum)
	})
	t.Run("truncated", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Truncate(filepath.Join(dir, last.File), last.Size/2))
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrTruncated)
		require.ErrorIs(t, Checksum(ctx, dir), ErrTruncated)
	})
	t.Run("truncated with a matching manifest", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Truncate(filepath.Join(dir, last.File), last.Size-1000))
		rewriteStreamsManifest(t, dir)
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir), WithFullCheck())
		require.ErrorIs(t, err, ErrUnreadable)
	})
	t.Run("missing", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Remove(filepath.Join(dir, last.File)))
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrIncomplete)
		require.ErrorIs(t, Checksum(ctx, dir), ErrIncomplete)
	})
}

// A backup in streams cancelled mid-way leaves nothing; a restore cancelled while the streams'
// data goes in leaves the target as it was and no new database behind.
func TestStreamsKilledMidway(t *testing.T) {
	ctx := context.Background()
	s, m, _ := streamsBackup(t, "streams_kill")
	t.Run("backup", func(t *testing.T) {
		out := t.TempDir()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var once atomic.Bool
		_, err := Create(cctx, localTarget(s, "streams_kill", s.BinDir), WithOutputDir(out), WithDumpJobs(3), WithSecrets(fakeSecrets),
			WithProgress(func(n int64) {
				if n > 256<<10 && once.CompareAndSwap(false, true) {
					assert.Len(t, entries(t, out), 1, "the backup directory exists mid-dump")
					cancel()
				}
			}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no backup was kept")
		assert.Empty(t, entries(t, out))
	})
	t.Run("restore", func(t *testing.T) {
		target, before := streamsTarget(t, s, "streams_kill_dst")
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Cancelled as soon as a stream's data starts going in (after each stream's table of
		// contents was read).
		orig := openDump
		var opened atomic.Int32
		openDump = func(path string) (io.ReadCloser, error) {
			f, err := orig(path)
			if err == nil && strings.Contains(filepath.Base(path), "-") && opened.Add(1) > int32(len(m.Streams)-1) {
				cancel()
			}
			return f, err
		}
		t.Cleanup(func() { openDump = orig })
		sc := &fakeScaler{}
		_, err := Restore(cctx, target, m.Dir, WithToolsDir(s.BinDir), WithScaler(sc))
		require.Error(t, err)
		assert.Equal(t, sc.downs, sc.ups, "writers scaled back")
		got, err := pgtest.Checksums(ctx, s, target.conn.Database)
		require.NoError(t, err)
		assert.Equal(t, before, got)
		assertNoScratchLeft(t, s, target.conn.Database)
	})
}

// assertNoScratchLeft: no database of a restore by swap is left beside db.
func assertNoScratchLeft(t *testing.T, s *pgtest.Server, db string) {
	t.Helper()
	out, err := s.Psql(context.Background(), "postgres", "SELECT string_agg(datname, ',') FROM pg_database WHERE datname LIKE '"+db+"\\_%'")
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(out), "databases left beside %s", db)
}

// Streams come out of the database pod as a dump in one archive does (each pg_dump's stdout
// through its own exec), and a pod's target restores them in one transaction: psql in the pod,
// fed the SQL of every stream in turn.
func TestStreamsFromAndIntoAPod(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	_, _, want := streamsBackup(t, "streams_pod")
	bin, argvLog := toolWrappers(t, s)
	containerEnv := func(db string) []string {
		return []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "PGHOST=" + s.Host, "PGPORT=" + strconv.Itoa(s.Port),
			"POSTGRES_USER=" + s.User, "POSTGRES_DB=" + db, "POSTGRES_PASSWORD=" + s.Password(), "PGPASSWORD="}
	}
	src := NewPodTarget(&localExecer{env: containerEnv("streams_pod")}, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)
	m, err := Create(ctx, src, WithOutputDir(t.TempDir()), WithDumpJobs(3))
	require.NoError(t, err)
	require.Len(t, m.Streams, 4)

	_, before := streamsTarget(t, s, "streams_pod_dst")
	require.NotEqual(t, want, before)
	dst := NewPodTarget(&localExecer{env: containerEnv("streams_pod_dst")}, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)
	rr, err := Restore(ctx, dst, m.Dir, WithToolsDir(s.BinDir))
	require.NoError(t, err)
	assert.Equal(t, RestoredInOneTransaction, rr.Way)
	got, err := pgtest.Checksums(ctx, s, "streams_pod_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// The pg_restore here too old for the dump: the one in the pod turns it into SQL.
	old := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(old, "pg_restore"),
		[]byte("#!/bin/sh\necho 'pg_restore: error: unsupported version (1.99) in file header' >&2\nexit 1\n"), 0o755))
	_, err = s.Psql(ctx, "streams_pod_dst", "DELETE FROM metrics WHERE id % 3 = 0")
	require.NoError(t, err)
	podEx := &localExecer{env: containerEnv("streams_pod_dst")}
	dst = NewPodTarget(podEx, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)
	_, err = Restore(ctx, dst, m.Dir, WithToolsDir(old))
	require.NoError(t, err)
	got, err = pgtest.Checksums(ctx, s, "streams_pod_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Contains(t, podEx.calls, []string{"pg_restore", "--file=-", "--no-owner", "--exit-on-error", "--data-only"}, "SQL made in the pod")

	argv, err := os.ReadFile(argvLog)
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(argv), "pg_dump -U polyaxon -d streams_pod --format=custom"), "four pg_dump streams")
	assert.Contains(t, string(argv), "--data-only --strict-names --table=")
	assert.NotContains(t, string(argv), s.Password())
}
