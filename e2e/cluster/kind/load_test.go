package kind

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// The images of run pods go to the run pools' nodes, the rest to the core pool's; a
// repository that only starts like a run image's is the platform's.
func TestKindImagesByPool(t *testing.T) {
	sets := ImagesByPool([]string{
		"polyaxon/polyaxon-api:2.18.0", "polyaxon/polyaxon-init:2.18.0", "postgres:15",
		"polyaxon/polyaxon-sidecar:2.18.0", "polyaxon/polyaxon-events-handlers:2.18.0",
		"registry.local:5000/polyaxon/polyaxon-init-extra:1",
	})
	assert.Equal(t, []Images{
		{Images: []string{"polyaxon/polyaxon-api:2.18.0", "postgres:15", "registry.local:5000/polyaxon/polyaxon-init-extra:1"}, Pools: []string{cluster.PoolCore}},
		{Images: []string{"polyaxon/polyaxon-init:2.18.0", "polyaxon/polyaxon-sidecar:2.18.0", "polyaxon/polyaxon-events-handlers:2.18.0"}, Pools: []string{cluster.PoolExperiments, cluster.PoolBuilds}},
	}, sets)
}
