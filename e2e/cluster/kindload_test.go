package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The images of run pods go to the run pools' nodes, the rest to the core pool's; a
// repository that only starts like a run image's is the platform's.
func TestKindImagesByPool(t *testing.T) {
	sets := KindImagesByPool([]string{
		"polyaxon/polyaxon-api:2.18.0", "polyaxon/polyaxon-init:2.18.0", "postgres:15",
		"polyaxon/polyaxon-sidecar:2.18.0", "polyaxon/polyaxon-events-handlers:2.18.0",
		"registry.local:5000/polyaxon/polyaxon-init-extra:1",
	})
	assert.Equal(t, []KindImages{
		{Images: []string{"polyaxon/polyaxon-api:2.18.0", "postgres:15", "registry.local:5000/polyaxon/polyaxon-init-extra:1"}, Pools: []string{PoolCore}},
		{Images: []string{"polyaxon/polyaxon-init:2.18.0", "polyaxon/polyaxon-sidecar:2.18.0", "polyaxon/polyaxon-events-handlers:2.18.0"}, Pools: []string{PoolExperiments, PoolBuilds}},
	}, sets)
}
