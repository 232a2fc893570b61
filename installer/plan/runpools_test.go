package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

var gpuPoolTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// node is a Ready node of a pool with what it holds.
func poolNode(name, pool, cpu, mem, disk string, gpus int64, taints ...corev1.Taint) corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse(disk),
	}
	if gpus > 0 {
		alloc["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	labels := map[string]string{"kubernetes.io/hostname": name}
	if pool != "" {
		labels["polyaxon"] = pool
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// demoNodes are the e2e demo's pools (e2e/cluster DefaultNodePools), and a control plane.
func demoNodes() []corev1.Node {
	return []corev1.Node{
		poolNode("core-0", "core", "8", "32Gi", "100Gi", 0), poolNode("core-1", "core", "8", "32Gi", "100Gi", 0),
		poolNode("experiments-0", "experiments", "16", "64Gi", "100Gi", 4, gpuPoolTaint),
		poolNode("experiments-1", "experiments", "16", "64Gi", "100Gi", 4, gpuPoolTaint),
		poolNode("builds-0", "builds", "8", "16Gi", "100Gi", 0),
		poolNode("control-plane", "", "4", "8Gi", "50Gi", 0, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}),
	}
}

// productionCategories are where the production profile's admission policies send runs.
func productionCategories() []plan.CategoryScheduling {
	gpu := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	exp := map[string]string{"polyaxon": "experiments"}
	return []plan.CategoryScheduling{
		{Category: "experiments", NodeSelector: exp, Tolerations: gpu},
		{Category: "jobs", NodeSelector: exp, Tolerations: gpu},
		{Category: "builds", NodeSelector: map[string]string{"polyaxon": "builds"}},
		{Category: "tensorboards", NodeSelector: exp, Tolerations: gpu},
		{Category: "notebooks", NodeSelector: exp, Tolerations: gpu},
	}
}

func quantityText(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// The production profile on the demo's cluster: the experiments and builds pools, never core
// or the control plane.
func TestSizedFromTheRunPools(t *testing.T) {
	s := plan.SizeRunPools(plan.NewSnapshot(demoNodes(), nil), productionCategories(), nil)
	require.NotNil(t, s)
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=builds", Nodes: 1}, {Pool: "polyaxon=experiments", Nodes: 2}}, s.Pools)
	assert.Equal(t, map[string]string{"cpu": "40", "memory": "144Gi", "ephemeral-storage": "300Gi", "pods": "330", "nvidia.com/gpu": "8"}, quantityText(s.Totals))
	assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantityText(s.Largest))
	assert.Equal(t, map[string]any{"runs": map[string]any{
		"quota": map[string]any{"pods": "660", "cpu": "80", "memory": "288Gi", "ephemeralStorage": "600Gi",
			"gpus": map[string]any{"nvidia.com/gpu": "16"}},
		"limitRange": map[string]any{"max": map[string]any{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}},
	}}, s.Values())
	assert.Equal(t, "16", s.Paths()["runs.limitRange.max.cpu"])
	assert.Equal(t, "16", s.Paths()["runs.quota.gpus.nvidia.com/gpu"], "the pools' 8, Backlog times")
	assert.Equal(t, "run pools polyaxon=builds (1 node), polyaxon=experiments (2 nodes): pods 330, cpu 40, memory 144Gi, ephemeral-storage 300Gi, nvidia.com/gpu 8; the quota twice that", s.String())
}

// A node is in a run pool when a category's placement lands there: its selector and its
// tolerations of the node's own taints. A category the policies refuse is no pool.
func TestRunPoolsAreWhereRunsLand(t *testing.T) {
	snap := func(nodes ...corev1.Node) *plan.Snapshot { return plan.NewSnapshot(nodes, nil) }
	// The GPU pool's taint, not tolerated: only builds.
	untolerated := productionCategories()
	for i := range untolerated {
		untolerated[i].Tolerations = nil
	}
	s := plan.SizeRunPools(snap(demoNodes()...), untolerated, nil)
	require.NotNil(t, s)
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=builds", Nodes: 1}}, s.Pools)
	assert.NotContains(t, s.Totals, corev1.ResourceName("nvidia.com/gpu"))

	// A refused category (one placed on core) adds nothing.
	onCore := append(productionCategories(), plan.CategoryScheduling{Category: "x", NodeSelector: map[string]string{"polyaxon": "core"}, Refused: "core is protected"})
	s = plan.SizeRunPools(snap(demoNodes()...), onCore, nil)
	assert.Equal(t, "40", quantityText(s.Totals)["cpu"])

	// A NotReady node is still the pool's: its not-ready taint is the condition's, for a while.
	notReady := poolNode("builds-1", "builds", "8", "16Gi", "100Gi", 0)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	s = plan.SizeRunPools(snap(append(demoNodes(), notReady)...), productionCategories(), nil)
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=builds", Nodes: 2}, {Pool: "polyaxon=experiments", Nodes: 2}}, s.Pools)

	// Required node affinity, and pools named by another label.
	byAffinity := []plan.CategoryScheduling{{Category: "jobs", Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "polyaxon", Operator: corev1.NodeSelectorOpIn, Values: []string{"core"}}}}}}}}}}
	s = plan.SizeRunPools(snap(demoNodes()...), byAffinity, []string{"kubernetes.io/hostname"})
	assert.Equal(t, []plan.PoolCount{{Pool: "kubernetes.io/hostname=core-0", Nodes: 1}, {Pool: "kubernetes.io/hostname=core-1", Nodes: 1}}, s.Pools)

	// No category lands anywhere: nothing is sized.
	assert.Nil(t, plan.SizeRunPools(snap(demoNodes()...), []plan.CategoryScheduling{{Category: "jobs", NodeSelector: map[string]string{"polyaxon": "tpu"}}}, nil))
	assert.Nil(t, plan.SizeRunPools(snap(), productionCategories(), nil))
}

// GPUs are the extended resources whose name says so; others (a device plugin's fuse, hugepages) are left alone.
func TestGPUsAreSizedByName(t *testing.T) {
	n := poolNode("gpu-0", "experiments", "8", "32Gi", "100Gi", 2, gpuPoolTaint)
	n.Status.Allocatable["amd.com/gpu"] = resource.MustParse("1")
	n.Status.Allocatable["smarter-devices/fuse"] = resource.MustParse("20")
	n.Status.Allocatable["hugepages-2Mi"] = resource.MustParse("1Gi")
	s := plan.SizeRunPools(plan.NewSnapshot([]corev1.Node{n}, nil), productionCategories(), nil)
	require.NotNil(t, s)
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "4", "amd.com/gpu": "2"}, s.Values()["runs"].(map[string]any)["quota"].(map[string]any)["gpus"])
}
