package backup

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/pgtest"
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
