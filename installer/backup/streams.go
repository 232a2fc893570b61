package backup

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// A dump in parallel streams. One pg_dump sends every table through one COPY stream after the
// other, and that one server backend sets the pace of a backup. pg_dump's directory format
// (-Fd -j N) splits the tables among N sessions that share one snapshot, but it writes a file
// per table on the machine pg_dump runs on: in the Postgres pod, where there is no room for a
// second copy of the database, and not on a stream we could compress and hash on the way.
// Streams do what -Fd -j does, over stdout: N pg_dump runs, all with --snapshot of the backup's
// exported snapshot (so together they are one consistent dump); the first dumps the schema and
// the data of the small tables (--exclude-table-data of the others), each of the others dumps
// only the data of its share of the large tables (--data-only --table). Each stream is an
// ordinary custom-format archive, streamed out, compressed and hashed like a dump in one.

// streamTable is a table whose data may go to a stream of its own.
type streamTable struct {
	Schema string
	Name   string
	Bytes  int64 // pg_table_size: the heap and TOAST a COPY reads
}

func (t streamTable) size() int64 { return t.Bytes }

// qualified is the table as pg_restore --list and the row counts name it.
func (t streamTable) qualified() string { return t.Schema + "." + t.Name }

// pattern matches exactly this table in pg_dump's --table and --exclude-table-data: inside
// double quotes every character is literal (a doubled quote is one quote).
func (t streamTable) pattern() string {
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	return q(t.Schema) + "." + q(t.Name)
}

// tableSizesSQL lists the tables pg_dump dumps the data of (ordinary tables, partitions
// included, outside the system schemas, not an extension's), largest first, as one JSON line
// (names may hold any character).
const tableSizesSQL = `SELECT coalesce(json_agg(json_build_array(n.nspname, c.relname, pg_table_size(c.oid)) ORDER BY pg_table_size(c.oid) DESC, n.nspname, c.relname), '[]')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp_)'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`

func parseTableSizes(answer string) ([]streamTable, error) {
	var rows [][3]json.RawMessage
	if err := json.Unmarshal([]byte(answer), &rows); err != nil {
		return nil, fmt.Errorf("reading the tables' sizes: unexpected answer %q: %w", answer, err)
	}
	out := make([]streamTable, 0, len(rows))
	for _, r := range rows {
		var t streamTable
		if err := errors.Join(json.Unmarshal(r[0], &t.Schema), json.Unmarshal(r[1], &t.Name), json.Unmarshal(r[2], &t.Bytes)); err != nil {
			return nil, fmt.Errorf("reading the tables' sizes: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Below these, a stream of its own costs more (a pg_dump, a server session, a file, a restore
// run) than it saves.
const (
	minStreamedDatabase = 64 << 20 // the tables' data, for the default number of streams
	minStreamedTable    = 1 << 20  // one table, to leave the first stream
	maxDefaultStreams   = 4
)

// defaultStreams is how many streams carry the large tables' data unless told: twice the
// server's cores, at most 4, and none for a small database (1: a dump in one archive); no more
// than there are large tables, planStreams sees to that. More streams than cores, because a
// stream carries whole tables and a table's COPY costs per byte depend on its columns (jsonb,
// bytea, numbers): sizes balance the streams poorly, and the scheduler balances more of them
// better. On 2 cores, a 1 GiB database: 4 streams 4.9 s, 2 streams 6.0 s (e2e/bench/backup).
// cores is asked only for a database large enough.
func defaultStreams(cores func() int, tables []streamTable) int {
	var total int64
	for _, t := range tables {
		total += t.Bytes
	}
	if total < minStreamedDatabase {
		return 1
	}
	return max(min(2*cores(), maxDefaultStreams), 1)
}

// planStreams shares the tables of at least minStreamedTable among n streams of their own, the
// largest first into the stream with the least data so far (which balances a handful of
// streams well enough). The first stream, with the schema, keeps the small tables' data only:
// it is the one a restore spools to a file, for pg_restore --jobs to build the indexes from.
// It returns the tables of each stream after the first; fewer than n when there are too few
// large tables.
func planStreams(tables []streamTable, n int) [][]streamTable {
	if n <= 1 {
		return nil
	}
	var large []streamTable
	for _, t := range tables {
		if t.Bytes >= minStreamedTable {
			large = append(large, t)
		}
	}
	return shareBySize(large, n, streamTable.size)
}

// shareBySize shares items among at most n shares of about the same size: the largest
// first into the share with the least so far (which balances a handful of shares well
// enough). Empty shares are left out.
func shareBySize[T any](items []T, n int, size func(T) int64) [][]T {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b T) int { return cmp.Compare(size(b), size(a)) })
	load := make([]int64, max(n, 1))
	shares := make([][]T, len(load))
	for _, item := range sorted {
		i := slices.Index(load, slices.Min(load))
		load[i] += size(item)
		shares[i] = append(shares[i], item)
	}
	return slices.DeleteFunc(shares, func(s []T) bool { return len(s) == 0 })
}

// coreCounter is a target that can tell how many cores its PostgreSQL server has.
type coreCounter interface {
	cores(ctx context.Context) (int, error)
}

// serverCores is the number of cores the target's server has, 2 when it cannot tell. A local
// target's server is taken to share this machine (the port-forward of an in-cluster database
// reaches a pod of the same cluster, which tells nothing either way).
func serverCores(ctx context.Context, t Target) int {
	if c, ok := t.(coreCounter); ok {
		if n, err := c.cores(ctx); err == nil && n > 0 {
			return n
		}
	}
	if _, ok := t.(*LocalTarget); ok {
		return runtime.NumCPU()
	}
	return 2
}

// streamFile names the archive of stream i (0: the schema's, named as a dump in one archive).
func streamFile(i int, codec string) string {
	if i == 0 {
		return DumpBaseName + fileExt(codec)
	}
	return fmt.Sprintf("%s-%d%s", DumpBaseName, i, fileExt(codec))
}

// streamArgs are the pg_dump flags of each stream after base (format, compression, snapshot):
// the first dumps everything but the data the others carry.
func streamArgs(base []string, streams [][]streamTable, dumpArgs []string) [][]string {
	first := slices.Clone(base)
	for _, s := range streams {
		for _, t := range s {
			first = append(first, "--exclude-table-data="+t.pattern())
		}
	}
	out := [][]string{append(first, dumpArgs...)}
	for _, s := range streams {
		// --strict-names: a table that is not there (it cannot be: one snapshot) fails the
		// backup instead of leaving its data out.
		args := append(slices.Clone(base), "--data-only", "--strict-names")
		for _, t := range s {
			args = append(args, "--table="+t.pattern())
		}
		out = append(out, args)
	}
	return out
}
