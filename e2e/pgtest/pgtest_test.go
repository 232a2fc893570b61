package pgtest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerSeedAndChecksums(t *testing.T) {
	ctx := context.Background()
	s := New(t, WithFastUnsafe())

	out, err := s.Psql(ctx, s.Database, "SELECT current_user, current_database()")
	require.NoError(t, err)
	assert.Equal(t, "polyaxon|polyaxon", out)

	require.NoError(t, Seed(ctx, s, s.Database, SeedSpec{Runs: 2000, BatchSize: 1500}))
	sums, err := Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, Tables, orderLike(Tables, slices.Sorted(maps.Keys(sums))))
	assert.True(t, strings.HasPrefix(sums["runs"], "2000:"), sums["runs"])
	assert.True(t, strings.HasPrefix(sums["metrics"], "10000:"), sums["metrics"])

	// Same seed in another database gives the same checksums; a change shows.
	require.NoError(t, s.CreateDatabase(ctx, "other"))
	require.NoError(t, Seed(ctx, s, "other", SeedSpec{Runs: 2000}))
	other, err := Checksums(ctx, s, "other")
	require.NoError(t, err)
	assert.Equal(t, sums, other)
	_, err = s.Psql(ctx, "other", "UPDATE artifacts SET content = content || '\\x00'::bytea WHERE id = 7")
	require.NoError(t, err)
	other, err = Checksums(ctx, s, "other")
	require.NoError(t, err)
	assert.NotEqual(t, sums["artifacts"], other["artifacts"])

	// Password authentication is enforced on TCP.
	good := s.password
	s.password = "wrong"
	_, err = s.Psql(ctx, s.Database, "SELECT 1")
	s.password = good
	require.Error(t, err)
	assert.Contains(t, err.Error(), "password authentication failed")

	// Stop + restart keeps the data.
	require.NoError(t, s.Stop(ctx, "immediate"))
	require.NoError(t, s.Restart(ctx))
	n, err := s.Psql(ctx, s.Database, "SELECT count(*) FROM runs")
	require.NoError(t, err)
	assert.Equal(t, "2000", n)
}

func TestBinDirOverrideMissing(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	_, err := BinDir()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install")
}

func orderLike(want, got []string) []string {
	set := map[string]bool{}
	for _, g := range got {
		set[g] = true
	}
	var out []string
	for _, w := range want {
		if set[w] {
			out = append(out, w)
		}
	}
	if len(out) != len(got) {
		return got
	}
	return out
}
