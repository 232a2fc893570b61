package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A stream's archive loaded by our process. pg_restore --data-only would turn the archive into
// SQL and psql parse it back, two programs and two pipes that the data cross on the restore's
// two cores (about a CPU-second for 1 GiB, e2e/bench/backup). Instead the archive is read here
// (archive.go) and each table's data sent to the server as the COPY data it already is, on one
// connection, in one transaction: TRUNCATE ONLY and COPY ... WITH (FREEZE) for the stream's
// new ordinary tables (freeze.go says why), a plain COPY for the others, then the sequences'
// values. The statements are ours: a name or column of the archive is never sent as SQL
// text but read and quoted again, so nothing in an archive, altered or not, runs as SQL. An
// archive holding anything else (large objects, an entry of a kind not listed here), of a
// version or compression this reader does not know, or a restore with pg_restore options of
// the user's, goes through pg_restore as before (loadFrozen).

// copyLoad loads stream archives into one database.
type copyLoad struct {
	db *LocalTarget
	// frozen are the new database's ordinary tables ("schema.name"): loaded frozen.
	frozen map[string]string
	// loaded, when set, gets each stream's row counts as the server's COPYs reported them.
	loaded func(rows map[string]int64)
	log    *slog.Logger
}

// tool loads the archive of a stream whose tables (as the manifest names them) are tables.
// An archive it leaves to pg_restore is a *loadByPgRestore error, returned before any of the
// archive's data is read.
func (l copyLoad) tool(tables []string) pipeTool {
	return func(ctx context.Context, stdin io.Reader, _ io.Writer) error {
		ar := newArchiveReader(stdin)
		plan, err := l.plan(ar, tables)
		if errors.Is(err, errNotReadable) {
			return &loadByPgRestore{why: err}
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		rows, err := l.load(ctx, ar, plan)
		if err != nil {
			return err
		}
		l.log.Debug("a stream's archive loaded by COPY", "tables", len(rows))
		if l.loaded != nil {
			l.loaded(rows)
		}
		return nil
	}
}

// loadByPgRestore says that an archive is pg_restore's to load. pg_restore's SQL runs as SQL:
// the archive's sha256 is checked before pg_restore reads it (restoreStreams).
type loadByPgRestore struct{ why error }

func (e *loadByPgRestore) Error() string { return "loaded by pg_restore: " + e.why.Error() }

// loadPlan is what an archive loads: its tables' COPYs by dump ID, and its sequences' values.
type loadPlan struct {
	encoding  string
	copies    map[int]tableCopy
	sequences []sequenceValue
}

// tableCopy is one table's COPY statement, made of its name and columns as the archive gives
// them, quoted by us.
type tableCopy struct {
	table  string // "schema.name"
	frozen bool
	sql    string // COPY ... FROM STDIN
	quoted string // the table's name, quoted
}

type sequenceValue struct {
	name   string // the sequence's name as setval's text argument
	value  int64
	called bool
}

// plan reads the archive's header and table of contents, and says what to load, or why
// pg_restore is to load it.
func (l copyLoad) plan(ar *archiveReader, tables []string) (*loadPlan, error) {
	if err := l.connectable(); err != nil {
		return nil, err
	}
	if err := ar.header(); err != nil {
		return nil, err
	}
	entries, err := ar.toc()
	if err != nil {
		return nil, err
	}
	p := &loadPlan{copies: map[int]tableCopy{}}
	for _, e := range entries {
		switch {
		case e.desc == "ENCODING":
			m := encodingSQL.FindStringSubmatch(e.defn)
			if m == nil {
				return nil, fmt.Errorf("an encoding entry %q", e.defn)
			}
			p.encoding = m[1]
		case e.section != sectionData:
			// pg_restore --data-only restores only the data section.
		case e.desc == "TABLE DATA" && e.hadDumper && e.copyStmt == "":
			return nil, fmt.Errorf("%w: the data of %s.%s are INSERT statements", errNotReadable, e.namespace, e.tag)
		case e.desc == "TABLE DATA" && e.hadDumper && e.defn != "":
			// "-- load via partition root ...": the rows go through another table.
			return nil, fmt.Errorf("%w: the data of %s.%s load through their partition root", errNotReadable, e.namespace, e.tag)
		case e.desc == "TABLE DATA" && e.hadDumper:
			c, err := l.tableCopy(e, tables)
			if err != nil {
				return nil, err
			}
			for _, other := range p.copies {
				if other.table == c.table {
					return nil, fmt.Errorf("the data of %s twice", c.table)
				}
			}
			p.copies[e.dumpID] = c
		case e.desc == "SEQUENCE SET":
			s, err := parseSetval(e.defn)
			if err != nil {
				return nil, err
			}
			p.sequences = append(p.sequences, s)
		default:
			return nil, fmt.Errorf("%w: it holds an entry %q (%s) in the data section", errNotReadable, e.desc, e.tag)
		}
	}
	if p.encoding == "" {
		return nil, errors.New("no encoding entry")
	}
	return p, nil
}

// encodingSQL is the ENCODING entry's statement.
var encodingSQL = regexp.MustCompile(`^SET client_encoding = '([A-Za-z0-9_]+)';\n$`)

// tableCopy makes the COPY of a TABLE DATA entry: the table must be one of the stream's, and
// the entry's COPY statement name it and list its columns, which are read back as
// identifiers.
func (l copyLoad) tableCopy(e archiveEntry, tables []string) (tableCopy, error) {
	table := e.namespace + "." + e.tag
	if !slices.Contains(tables, table) {
		return tableCopy{}, fmt.Errorf("the data of %s, not a table of the stream", table)
	}
	columns, err := copyColumns(e.copyStmt, e.namespace, e.tag)
	if err != nil {
		return tableCopy{}, fmt.Errorf("the COPY of %s: %w", table, err)
	}
	quoted := pgx.Identifier{e.namespace, e.tag}.Sanitize()
	sql := "COPY " + quoted
	if len(columns) > 0 {
		q := make([]string, len(columns))
		for i, c := range columns {
			q[i] = pgx.Identifier{c}.Sanitize()
		}
		sql += " (" + strings.Join(q, ", ") + ")"
	}
	sql += " FROM STDIN"
	_, frozen := l.frozen[table]
	if frozen {
		sql += " WITH (FREEZE)"
	}
	return tableCopy{table: table, frozen: frozen, sql: sql, quoted: quoted}, nil
}

// copyColumns reads the columns of pg_dump's "COPY schema.name (a, b) FROM stdin;\n" (no list
// for a table without columns: "COPY schema.name  FROM stdin;\n"); the table it names must be
// schema.name.
func copyColumns(stmt, schema, name string) ([]string, error) {
	bad := fmt.Errorf("unexpected statement %.80q", stmt)
	rest, ok := strings.CutPrefix(stmt, "COPY ")
	if !ok {
		return nil, bad
	}
	var ids []string
	for _, want := range []string{schema, name} {
		id, after, ok := unquoteIdentifier(rest)
		if !ok || id != want {
			return nil, bad
		}
		ids, rest = append(ids, id), after
		if len(ids) == 1 {
			if rest, ok = strings.CutPrefix(rest, "."); !ok {
				return nil, bad
			}
		}
	}
	if rest == "  FROM stdin;\n" {
		return nil, nil
	}
	rest, ok = strings.CutPrefix(rest, " (")
	if !ok {
		return nil, bad
	}
	var columns []string
	for {
		id, after, ok := unquoteIdentifier(rest)
		if !ok {
			return nil, bad
		}
		columns = append(columns, id)
		if rest, ok = strings.CutPrefix(after, ", "); ok {
			continue
		}
		if after != ") FROM stdin;\n" {
			return nil, bad
		}
		return columns, nil
	}
}

// unquoteIdentifier reads an identifier as pg_dump writes one (fmtId): bare when it is only
// lower-case letters, digits and underscores, else in double quotes with quotes doubled.
func unquoteIdentifier(s string) (id, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		end := strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') })
		if end <= 0 {
			return "", "", false
		}
		return s[:end], s[end:], true
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), s[i+1:], b.Len() > 0
	}
	return "", "", false
}

// setvalSQL is a SEQUENCE SET entry's statement; the name is a literal, its quotes doubled.
var setvalSQL = regexp.MustCompile(`^SELECT pg_catalog\.setval\('((?:[^']|'')+)', (-?[0-9]+), (true|false)\);\n$`)

func parseSetval(defn string) (sequenceValue, error) {
	m := setvalSQL.FindStringSubmatch(defn)
	if m == nil {
		return sequenceValue{}, fmt.Errorf("a sequence's value set by %.80q", defn)
	}
	v, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return sequenceValue{}, fmt.Errorf("a sequence's value %q: %w", m[2], err)
	}
	return sequenceValue{name: strings.ReplaceAll(m[1], "''", "'"), value: v, called: m[3] == "true"}, nil
}

// sessionSettings are pg_restore's for its session, where they bear on a COPY and setval:
// no timeout cuts a long load, names resolve only qualified, XML values are content, and a
// table's row security does not filter a load (it fails one instead, as pg_restore's does).
const sessionSettings = "SET statement_timeout = 0; SET lock_timeout = 0; SET idle_in_transaction_session_timeout = 0; " +
	"SELECT pg_catalog.set_config(name, '0', false) FROM pg_catalog.pg_settings WHERE name = 'transaction_timeout'; " + // PostgreSQL 17
	"SELECT pg_catalog.set_config('search_path', '', false); SET xmloption = content; SET row_security = off"

// load runs the plan's statements in one transaction, each table's data straight from the
// archive, and returns the rows of each table as the server counted them.
func (l copyLoad) load(ctx context.Context, ar *archiveReader, p *loadPlan) (map[string]int64, error) {
	cfg, err := l.config(p.encoding)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the new database: %w", err)
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = conn.Close(closing)
	}()
	exec := func(sql string) error {
		_, err := conn.Exec(ctx, sql).ReadAll()
		return err
	}
	if err := exec(sessionSettings + "; BEGIN"); err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	seen := map[int]bool{}
	for {
		id, err := ar.nextBlock()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive's data: %w", err)
		}
		c, ok := p.copies[id]
		if !ok || seen[id] {
			return nil, fmt.Errorf("reading the archive's data: a block of entry %d, which has no data to load", id)
		}
		seen[id] = true
		if c.frozen {
			if err := exec("TRUNCATE ONLY " + c.quoted); err != nil {
				return nil, fmt.Errorf("emptying %s: %w", c.table, err)
			}
		}
		// pgconn may return before its goroutine stops reading the rows (the server ended the
		// session): the rows are closed before anything reads the archive again.
		rows := &closableReader{r: &copyRows{src: ar.blockData(), buf: make([]byte, 256<<10)}}
		tag, err := conn.CopyFrom(ctx, rows, c.sql)
		rows.close()
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", c.table, err)
		}
		counts[c.table] = tag.RowsAffected()
	}
	if len(seen) != len(p.copies) {
		return nil, fmt.Errorf("reading the archive's data: it ends before the data of %d of its %d tables", len(p.copies)-len(seen), len(p.copies))
	}
	for _, s := range p.sequences {
		rr := conn.ExecParams(ctx, "SELECT pg_catalog.setval($1::pg_catalog.regclass, $2::pg_catalog.int8, $3::pg_catalog.bool)",
			[][]byte{[]byte(s.name), []byte(strconv.FormatInt(s.value, 10)), []byte(strconv.FormatBool(s.called))}, nil, nil, nil)
		if _, err := rr.Close(); err != nil {
			return nil, fmt.Errorf("setting sequence %s: %w", s.name, err)
		}
	}
	if err := exec("COMMIT"); err != nil {
		return nil, err
	}
	return counts, nil
}

// connectable says whether this target's connection can be made here as its programs' would
// be: from its settings and the PG* variables the programs would read.
func (l copyLoad) connectable() error {
	for _, kv := range l.db.env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := pgEnvSettings[name]; !ok {
			return fmt.Errorf("%w: the programs' environment sets %s", errNotReadable, name)
		}
	}
	return nil
}

// pgEnvSettings are the PG* variables a target may add for its programs, and the connection
// setting each one is.
var pgEnvSettings = map[string]string{
	"PGSSLROOTCERT": "sslrootcert", "PGSSLCERT": "sslcert", "PGSSLKEY": "sslkey", "PGSSLMODE": "sslmode",
	"PGAPPNAME": "application_name", "PGCONNECT_TIMEOUT": "connect_timeout", "PGPASSFILE": "passfile",
}

// config is the connection the target's programs would make (LocalTarget.Run), with the
// archive's encoding.
func (l copyLoad) config(encoding string) (*pgconn.Config, error) {
	c := l.db.conn
	q := url.Values{}
	q.Set("host", c.Host)
	q.Set("port", strconv.Itoa(c.Port))
	q.Set("user", c.User)
	q.Set("dbname", c.Database)
	q.Set("connect_timeout", "30")
	if c.Password != "" {
		q.Set("password", c.Password)
	}
	if c.SSLMode != "" {
		q.Set("sslmode", c.SSLMode)
	}
	for _, kv := range l.db.env {
		name, value, _ := strings.Cut(kv, "=")
		q.Set(pgEnvSettings[name], value)
	}
	q.Set("client_encoding", encoding)
	cfg, err := pgconn.ParseConfig((&url.URL{Scheme: "postgres", Path: "/", RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, fmt.Errorf("the new database's connection: %w", err)
	}
	return cfg, nil
}

// closableReader is a reader that fails once closed, and whose close waits for a read under way.
type closableReader struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (c *closableReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("the COPY has ended")
	}
	return c.r.Read(p)
}

func (c *closableReader) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// copyRows reads a table's COPY data from src without the end-of-data line ("\." and blank
// lines) that pg_dump writes after the rows, in reads of the size of buf: src gives a row at a
// time, and each read is a message to the server.
type copyRows struct {
	src  io.Reader
	buf  []byte
	r, w int
	sent int64
	eof  bool
}

// copyEnds are the end lines a COPY's data may end with.
var copyEnds = []string{"\\.\n\n\n", "\\.\n"}

// copyEndHold is what copyRows holds back until the data's end: the longest end and the
// newline before it.
const copyEndHold = 6

func (c *copyRows) Read(p []byte) (int, error) {
	// The buffer is filled again once all but the held-back bytes are sent: only those move.
	if !c.eof && c.w-c.r <= copyEndHold {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.sent += int64(c.r)
		c.r = 0
		for c.w < len(c.buf) {
			n, err := c.src.Read(c.buf[c.w:])
			c.w += n
			if errors.Is(err, io.EOF) {
				c.eof = true
				c.w -= endLine(c.buf[:c.w], c.sent == 0)
				break
			}
			if err != nil {
				return 0, err
			}
		}
	}
	avail := c.w - c.r
	if !c.eof {
		avail -= copyEndHold
	}
	if avail <= 0 && c.eof {
		return 0, io.EOF
	}
	n := copy(p, c.buf[c.r:c.r+avail])
	c.r += n
	return n, nil
}

// endLine is the length of the end line that data (all of a COPY's data when whole, else
// their end) ends with, if any: a line "\." after a newline, or first.
func endLine(data []byte, whole bool) int {
	for _, end := range copyEnds {
		if !bytes.HasSuffix(data, []byte(end)) {
			continue
		}
		before := len(data) - len(end)
		if before > 0 && data[before-1] == '\n' || before == 0 && whole {
			return len(end)
		}
	}
	return 0
}
