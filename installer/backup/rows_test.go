package backup

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// TestRowCountsFromBackupToRestore: a backup records each table's row count, and a restore
// into an empty database reports the same counts, which are the seeded data's.
func TestRowCountsFromBackupToRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, sums := sharedServer(t)
	want := map[string]int64{}
	for table, sum := range sums {
		n, err := strconv.ParseInt(strings.SplitN(sum, ":", 2)[0], 10, 64)
		require.NoError(t, err)
		want["public."+table] = n
	}
	require.Equal(t, int64(pgtest.RowsFor(sharedRuns))+50+200, TotalRows(want), "seeded rows")

	m, err := Create(ctx, localTarget(s, s.Database, s.BinDir), WithOutputDir(t.TempDir()))
	require.NoError(t, err)
	assert.Equal(t, want, m.Rows, "the backup records every table's rows")
	back, err := ReadManifest(m.Dir)
	require.NoError(t, err)
	assert.Equal(t, want, back.Rows, "in manifest.json")

	db := "rows_restored"
	require.NoError(t, s.CreateDatabase(ctx, db))
	rep, err := Restore(ctx, localTarget(s, db, s.BinDir), m.Dir, WithToolsDir(s.BinDir))
	require.NoError(t, err)
	assert.Equal(t, m.Rows, rep.Rows, "the restore reports the rows the backup had")
}

// Counted in several sessions at once or in one, every table's rows are there, counted once.
func TestCountRowsEachInSessions(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	target := localTarget(s, s.Database, s.BinDir)
	want, err := CountRows(ctx, target)
	require.NoError(t, err)
	require.Len(t, want, 6)
	for _, sessions := range []int{0, 1, 2, 7} {
		got, err := countRowsEach(ctx, target, sessions, nil)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%d sessions", sessions)
	}
	// A table whose rows are known is not counted again.
	got, err := countRowsEach(ctx, target, 2, map[string]int64{"public.runs": 7, "public.gone": 3})
	require.NoError(t, err)
	assert.Equal(t, int64(7), got["public.runs"])
	assert.NotContains(t, got, "public.gone", "only the database's tables are counted")
	got["public.runs"] = want["public.runs"]
	assert.Equal(t, want, got)
}

func TestShareBySize(t *testing.T) {
	tables := []streamTable{{Name: "a", Bytes: 10}, {Name: "b", Bytes: 60}, {Name: "c", Bytes: 30}, {Name: "d", Bytes: 25}, {Name: "e", Bytes: 0}}
	names := func(shares [][]streamTable) (out [][]string) {
		for _, s := range shares {
			var n []string
			for _, t := range s {
				n = append(n, t.Name)
			}
			out = append(out, n)
		}
		return out
	}
	assert.Equal(t, [][]string{{"b", "e"}, {"c", "d", "a"}}, names(shareBySize(tables, 2, streamTable.size)))
	assert.Equal(t, [][]string{{"b", "c", "d", "a", "e"}}, names(shareBySize(tables, 1, streamTable.size)))
	assert.Equal(t, [][]string{{"b"}, {"c"}, {"d"}, {"a"}, {"e"}}, names(shareBySize(tables, 9, streamTable.size)), "no empty share")
}

// A restore's row counts against the backup's: every differing table is named.
func TestCompareRows(t *testing.T) {
	m := &Manifest{Rows: map[string]int64{"public.db_run": 3, "public.db_project": 1}}
	assert.NoError(t, CompareRows(m, map[string]int64{"public.db_run": 3, "public.db_project": 1, "public.extra": 9}))
	err := CompareRows(m, map[string]int64{"public.db_run": 2})
	require.Error(t, err)
	assert.Equal(t, "the restored database differs from the backup: public.db_project: 0 rows restored, 1 in the backup; public.db_run: 2 rows restored, 3 in the backup", err.Error())
}
