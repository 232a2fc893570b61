package cnpg

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLSN(t *testing.T) {
	got, err := parseLSN("16/B374D848")
	require.NoError(t, err)
	assert.Equal(t, uint64(0x16)<<32|0xB374D848, got)
	got, err = parseLSN("0/3000060")
	require.NoError(t, err)
	assert.Equal(t, uint64(0x3000060), got)
	for _, bad := range []string{"", "3000060", "0/xyz", "1FFFFFFFF/0"} {
		_, err := parseLSN(bad)
		assert.Error(t, err, bad)
	}
}

// What keeps a Cluster from healthy is said in the user's terms: its phase, its ready
// instances, a missing or moving primary.
func TestProblem(t *testing.T) {
	healthy := State{Phase: HealthyPhase, Instances: 3, Ready: 3, Primary: "db-1", TargetPrimary: "db-1"}
	assert.Empty(t, healthy.Problem())
	assert.True(t, healthy.Healthy())

	failing := State{Phase: "Failing over", Instances: 3, Ready: 2, Primary: "db-1", TargetPrimary: "db-2"}
	assert.Equal(t, `phase "Failing over"; 2 of 3 instances ready; the primary is moving from db-1 to db-2`, failing.Problem())
	assert.Equal(t, `phase "Setting up primary"; 0 of 3 instances ready; no primary`, (&State{Phase: "Setting up primary", Instances: 3}).Problem())
}
