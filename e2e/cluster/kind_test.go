package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKindProvider needs a Docker engine; without one it is skipped with the reason.
func TestKindProvider(t *testing.T) {
	ctx := context.Background()
	if err := DockerAvailable(ctx); err != nil {
		t.Skipf("kind provider: %v", err)
	}
	p := NewKindProvider(WithKindDataDir(t.TempDir()))
	name := UniqueName("e2e-kind")
	pools := []NodePool{
		{Name: PoolCore, Count: 1, Allocatable: resources("2", "4Gi", "110", 0)},
		{Name: PoolExperiments, Count: 1, Taints: []corev1.Taint{GPUTaint}, Allocatable: resources("2", "4Gi", "110", 1)},
		{Name: PoolBuilds, Count: 1, Allocatable: resources("2", "4Gi", "110", 0)},
	}
	c, err := p.Create(ctx, name, WithNodePools(pools...), WithTimeout(10*time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Delete(context.Background(), name)) })

	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: PoolLabel})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	for _, n := range nodes.Items {
		assert.True(t, NodeReady(&n), n.Name)
		if PoolOf(&n) == PoolExperiments {
			assert.Contains(t, n.Spec.Taints, GPUTaint)
			gpu := n.Status.Capacity[GPUResource]
			assert.Equal(t, int64(1), gpu.Value())
		}
	}
}
