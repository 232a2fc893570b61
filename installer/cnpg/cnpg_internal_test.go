package cnpg

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each standby's lag comes from the primary's pg_stat_replication, read in its container; a
// standby not replaying yet has none, and the others keep theirs.
func TestReadLag(t *testing.T) {
	var asked []string
	exec := func(_ context.Context, ns, pod, container string, cmd []string) (string, error) {
		asked = append(asked, ns+"/"+pod+"/"+container)
		return "db-2\t0\t00:00:00.0012\ndb-3\t\t0\n", nil
	}
	s := &State{Primary: "db-1", Members: []Instance{{Pod: "db-1", Role: "primary"}, {Pod: "db-2", Role: "replica"}, {Pod: "db-3", Role: "replica"}}}
	require.NoError(t, s.readLag(context.Background(), exec, "ml"))
	assert.Equal(t, []string{"ml/db-1/postgres"}, asked, "the primary's postgres container")
	assert.Nil(t, s.Members[0].LagBytes, "the primary has no lag")
	require.NotNil(t, s.Members[1].LagBytes)
	assert.Equal(t, int64(0), *s.Members[1].LagBytes)
	assert.Equal(t, "00:00:00.0012", s.Members[1].ReplayLag)
	assert.Nil(t, s.Members[2].LagBytes, "not replaying yet")

	failing := func(context.Context, string, string, string, []string) (string, error) {
		return "", errors.New("unable to upgrade connection")
	}
	assert.ErrorContains(t, (&State{Primary: "db-1"}).readLag(context.Background(), failing, "ml"), "asking the primary db-1 for its standbys")
}

// What keeps a Cluster from healthy is said in the user's terms: its phase, its ready
// instances, a missing or moving primary.
func TestProblem(t *testing.T) {
	healthy := State{Phase: HealthyPhase, Instances: 3, Ready: 3, Primary: "db-1", TargetPrimary: "db-1"}
	assert.Empty(t, healthy.Problem())
	assert.True(t, healthy.Healthy())

	failing := State{Phase: "Failing over", Instances: 3, Ready: 2, Primary: "db-1", TargetPrimary: "db-2"}
	rolling := State{Phase: HealthyPhase, Instances: 3, Ready: 3, Primary: "db-1", Image: "pg:16.5", RunningImage: "pg:16.4"}
	assert.Equal(t, "the instances run pg:16.4, the Cluster asks for pg:16.5", rolling.Problem())
	assert.Equal(t, `phase "Failing over"; 2 of 3 instances ready; the primary is moving from db-1 to db-2`, failing.Problem())
	assert.Equal(t, `phase "Setting up primary"; 0 of 3 instances ready; no primary`, (&State{Phase: "Setting up primary", Instances: 3}).Problem())
}
