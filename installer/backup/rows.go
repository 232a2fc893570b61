package backup

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// countRowsSQL counts every user table's rows exactly, in one statement: query_to_xml runs
// the per-table count(*) that plain SQL cannot name dynamically, without creating anything
// (so it also works on a read-only standby). The count is read back out of the XML text, so
// servers built without libxml work too.
const countRowsSQL = `SELECT schemaname || '.' || tablename,
  substring(query_to_xml(format('SELECT count(*) AS n FROM %I.%I', schemaname, tablename), false, true, '')::text FROM '<n>(\d+)</n>')
FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`

// countStatementsSQL writes, for every table countRowsSQL counts, the statement that counts
// its rows alone (countRowsEach runs each on its own).
const countStatementsSQL = `SELECT format('SELECT %L, count(*) FROM %I.%I', schemaname || '.' || tablename, schemaname, tablename)
FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`

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
// before its program does can be left open by a pod's runtime.
func countRowsEach(ctx context.Context, t Target) (map[string]int64, error) {
	var list bytes.Buffer
	stderr := newTail(4096)
	// -0: one statement per NUL-terminated record, whatever the table names hold.
	if err := t.Run(ctx, "psql", append(slices.Clone(psqlArgs), "-0", "-c", countStatementsSQL), Stdio{Stdout: &list, Stderr: stderr}); err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, withStderr(err, stderr))
	}
	var statements []string
	for _, s := range strings.Split(list.String(), "\x00") {
		if s = strings.TrimSpace(s); s != "" {
			statements = append(statements, s)
		}
	}
	rows := map[string]int64{}
	for chunk := range slices.Chunk(statements, countStatementsPerRun) {
		args := slices.Clone(psqlArgs)
		for _, s := range chunk {
			args = append(args, "-c", s)
		}
		var out bytes.Buffer
		if err := t.Run(ctx, "psql", args, Stdio{Stdout: &out, Stderr: stderr}); err != nil {
			return nil, fmt.Errorf("counting rows (%s): %w", t, withStderr(err, stderr))
		}
		counted, err := parseRowCounts(out.String())
		if err != nil {
			return nil, fmt.Errorf("counting rows (%s): %w", t, err)
		}
		maps.Copy(rows, counted)
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
