package backup

import (
	"bytes"
	"context"
	"fmt"
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

// countRowsEachSQL counts the same rows as countRowsSQL, one table per statement (psql's
// \gexec runs each generated statement on its own): each count holds its table's lock only
// while it counts, so that a count beside pg_restore's last pass never holds one table while
// waiting for another (see restoreStreams).
const countRowsEachSQL = `SELECT format('SELECT %L, count(*) FROM %I.%I', schemaname || '.' || tablename, schemaname, tablename)
FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1
\gexec
`

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

// countRowsEach is CountRows, counting one table per statement (countRowsEachSQL).
func countRowsEach(ctx context.Context, t Target) (map[string]int64, error) {
	var out bytes.Buffer
	stderr := newTail(4096)
	err := t.Run(ctx, "psql", append(slices.Clone(psqlArgs), "-f", "-"), Stdio{Stdin: strings.NewReader(countRowsEachSQL), Stdout: &out, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, withStderr(err, stderr))
	}
	rows, err := parseRowCounts(out.String())
	if err != nil {
		return nil, fmt.Errorf("counting rows (%s): %w", t, err)
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
