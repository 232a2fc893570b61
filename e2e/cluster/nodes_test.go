package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestDefaultNodePools(t *testing.T) {
	pools := DefaultNodePools()
	byName := map[string]NodePool{}
	for _, p := range pools {
		byName[p.Name] = p
		assert.Positive(t, p.Count, p.Name)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			q := p.Allocatable[r]
			assert.False(t, q.IsZero(), "%s: %s allocatable", p.Name, r)
		}
	}
	require.Len(t, byName, 3)
	exp := byName[PoolExperiments]
	assert.Equal(t, []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}, exp.Taints)
	gpu := exp.Allocatable[GPUResource]
	assert.False(t, gpu.IsZero())
	assert.Empty(t, byName[PoolCore].Taints)
	assert.Empty(t, byName[PoolBuilds].Taints)
	_, hasGPU := byName[PoolCore].Allocatable[GPUResource]
	assert.False(t, hasGPU)
}
