package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// countRowsSQL counts every user table's rows exactly, in one statement: query_to_xml runs
// the per-table count(*) that plain SQL cannot name dynamically, without creating anything
// (so it also works on a read-only standby). The count is read back out of the XML text, so
// servers built without libxml work too.
const countRowsSQL = `SELECT schemaname || '.' || tablename,
  substring(query_to_xml(format('SELECT count(*) AS n FROM %I.%I', schemaname, tablename), false, true, '')::text FROM '<n>(\d+)</n>')
FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`

// countStatementsSQL writes, for every table countRowsSQL counts, a JSON array of the size of
// its heap, its name, the statement that counts its rows alone (countRowsEach runs each on its
// own) and whether it has child tables (whose rows its count includes).
const countStatementsSQL = `SELECT json_build_array(pg_relation_size(format('%I.%I', schemaname, tablename)), schemaname || '.' || tablename,
  format('SELECT %L, count(*) FROM %I.%I', schemaname || '.' || tablename, schemaname, tablename),
  (SELECT c.relhassubclass FROM pg_catalog.pg_class c WHERE c.oid = format('%I.%I', schemaname, tablename)::regclass))
FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY schemaname, tablename`

// countStatementsPerRun bounds the -c arguments of one psql: through a pod, every argument
// travels in the exec request's URL.
const countStatementsPerRun = 100

// psqlArgs run psql for a machine to read: no ~/.psqlrc, no password prompt, unaligned rows
// without headers, and the first error ends it.
var psqlArgs = []string{"-X", "-w", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"}

// psqlQuery runs one query on t and returns its trimmed answer.
func psqlQuery(ctx context.Context, t Target, query string) (string, error) {
	var out bytes.Buffer
	stderr := newTail(4096)
	if err := t.Run(ctx, "psql", append(slices.Clone(psqlArgs), "-c", query), Stdio{Stdout: &out, Stderr: stderr}); err != nil {
		return "", withStderr(err, stderr)
	}
	return strings.TrimSpace(out.String()), nil
}

// CountRows returns the exact row count of every table of the target's database, keyed
// "schema.table".
func CountRows(ctx context.Context, t Target) (map[string]int64, error) {
	answer, err := psqlQuery(ctx, t, countRowsSQL)
	if err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, err)
	}
	rows, err := parseRowCounts(answer)
	if err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, err)
	}
	return rows, nil
}

// countRowsEach is CountRows, counting one table per statement: psql runs each -c in a
// transaction of its own, so each count holds its table's lock only while it counts, and a
// count beside pg_restore's last pass never holds one table while waiting for another (see
// restoreStreams). The statements go as arguments, not on stdin: an exec whose stdin ends
// before its program does can be left open by a pod's runtime. Up to sessions psql runs
// count at once, each a share of the tables of about the same size. The tables of known without
// child tables are not counted again: their rows are known's (what the server's COPYs loaded).
func countRowsEach(ctx context.Context, t Target, sessions int, known map[string]int64) (map[string]int64, error) {
	var list bytes.Buffer
	stderr := newTail(4096)
	// -0: one record per NUL-terminated line, whatever the table names hold.
	if err := t.Run(ctx, "psql", append(slices.Clone(psqlArgs), "-0", "-c", countStatementsSQL), Stdio{Stdout: &list, Stderr: stderr}); err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, withStderr(err, stderr))
	}
	type count struct {
		statement string
		bytes     int64 // the table's size
	}
	var counts []count
	rows := map[string]int64{}
	for _, record := range strings.Split(list.String(), "\x00") {
		if record = strings.TrimSpace(record); record == "" {
			continue
		}
		var c count
		var table string
		var children bool
		if err := json.Unmarshal([]byte(record), &[]any{&c.bytes, &table, &c.statement, &children}); err != nil || c.statement == "" {
			return nil, fmt.Errorf("counting rows (%s): unexpected answer %q", t, record)
		}
		// A COPY into a table loads its own rows only; count(*) counts its children's too.
		if n, ok := known[table]; ok && !children {
			rows[table] = n
			continue
		}
		counts = append(counts, c)
	}
	var runs [][]string
	for _, share := range shareBySize(counts, sessions, func(c count) int64 { return c.bytes }) {
		var statements []string
		for _, c := range share {
			statements = append(statements, c.statement)
		}
		runs = append(runs, slices.Collect(slices.Chunk(statements, countStatementsPerRun))...)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(sessions, 1))
	for _, statements := range runs {
		g.Go(func() error {
			args := slices.Clone(psqlArgs)
			for _, s := range statements {
				args = append(args, "-c", s)
			}
			var out bytes.Buffer
			stderr := newTail(4096)
			if err := t.Run(gctx, "psql", args, Stdio{Stdout: &out, Stderr: stderr}); err != nil {
				return fmt.Errorf("counting rows (%s): %w", t, withStderr(err, stderr))
			}
			counted, err := parseRowCounts(out.String())
			if err != nil {
				return fmt.Errorf("counting rows (%s): %w", t, err)
			}
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(rows, counted)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rows, nil
}

// parseRowCounts reads countRowsSQL's answer ("schema.table|n" lines).
func parseRowCounts(answer string) (map[string]int64, error) {
	rows := map[string]int64{}
	for _, line := range strings.Split(answer, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		table, n, ok := strings.Cut(line, "|")
		count, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("unexpected answer %q", line)
		}
		rows[table] = count
	}
	return rows, nil
}

// TotalRows sums a row count map.
func TotalRows(rows map[string]int64) int64 {
	var n int64
	for _, c := range rows {
		n += c
	}
	return n
}

// CompareRows says which of the backup's tables a restore left with another row count than
// the backup counted (nil: every one matches).
func CompareRows(m *Manifest, restored map[string]int64) error {
	var diff []string
	for _, t := range slices.Sorted(maps.Keys(m.Rows)) {
		if restored[t] != m.Rows[t] {
			diff = append(diff, fmt.Sprintf("%s: %d rows restored, %d in the backup", t, restored[t], m.Rows[t]))
		}
	}
	if len(diff) > 0 {
		return fmt.Errorf("the restored database differs from the backup: %s", strings.Join(diff, "; "))
	}
	return nil
}
