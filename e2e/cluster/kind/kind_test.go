package kind

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

func TestStaleSnapshotsAreOnlyOldDirectoriesOfNoLiveCluster(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{
		"e2e-kind-killed":      2 * time.Hour, // its test binary was killed
		"e2e-kind-live":        2 * time.Hour, // still running
		"e2e-kind-starting":    time.Minute,   // being created by another process
		"kind-images-12345":    time.Hour,     // a load's archives, left behind
		"kind-images-loading":  time.Minute,
		"not-a-directory.file": 2 * time.Hour,
	} {
		p := filepath.Join(dir, name)
		if filepath.Ext(name) == ".file" {
			require.NoError(t, os.WriteFile(p, nil, 0o600))
		} else {
			require.NoError(t, os.Mkdir(p, 0o700))
		}
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"e2e-kind-killed", "kind-images-12345"}, staleSnapshots(entries, []string{"e2e-kind-live"}, now))
}

func TestKindConfig(t *testing.T) {
	cfg, err := Config(cluster.DefaultNodePools())
	require.NoError(t, err)
	require.Len(t, cfg.Nodes, 6, "control plane + 2 core + 2 experiments + 1 builds")
	assert.Equal(t, "control-plane", string(cfg.Nodes[0].Role))
	counts := map[string]int{}
	for _, n := range cfg.Nodes[1:] {
		assert.Equal(t, "worker", string(n.Role))
		pool := n.Labels[cluster.PoolLabel]
		counts[pool]++
		if pool != cluster.PoolExperiments {
			assert.Empty(t, n.KubeadmConfigPatches, pool)
			continue
		}
		require.Len(t, n.KubeadmConfigPatches, 1)
		var patch struct {
			Kind             string `json:"kind"`
			NodeRegistration struct {
				Taints []corev1.Taint `json:"taints"`
			} `json:"nodeRegistration"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(n.KubeadmConfigPatches[0]), &patch))
		assert.Equal(t, "JoinConfiguration", patch.Kind)
		assert.Equal(t, []corev1.Taint{cluster.GPUTaint}, patch.NodeRegistration.Taints)
	}
	assert.Equal(t, map[string]int{cluster.PoolCore: 2, cluster.PoolExperiments: 2, cluster.PoolBuilds: 1}, counts)

	// The rendered config is what kind reads from a file: it must round-trip through YAML.
	b, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	assert.Contains(t, string(b), "kind.x-k8s.io/v1alpha4")
	assert.Contains(t, string(b), "polyaxon: experiments")

	_, err = Config([]cluster.NodePool{{Count: 1}})
	require.Error(t, err)
}
