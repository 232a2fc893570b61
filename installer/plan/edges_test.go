package plan_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// Like kube-scheduler's NodeResourcesFit, a resource the pod does not request is not checked:
// a node whose memory is overcommitted (existing pods asking more than allocatable, after the
// kubelet reserved more) still takes a CPU-only pod, and the message for a pod short of CPU
// does not blame memory.
func TestUnrequestedResourcesIgnoreOvercommit(t *testing.T) {
	snap := plan.NewSnapshot([]corev1.Node{node("over", 4, 1, 0, nil)}, []corev1.Pod{boundPod("hog", "over", map[string]string{"memory": "2Gi"})})
	pods := append(replicas(spec("light", map[string]string{"cpu": "1"}), 1), replicas(spec("heavy", map[string]string{"cpu": "8"}), 1)...)
	res := plan.Plan(snap, pods)
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict)
	assert.Equal(t, "over", res.Pods[0].Node)
	assert.Equal(t, plan.Unschedulable, res.Pods[1].Verdict)
	assert.Equal(t, "0/1 nodes are available: 1 Insufficient cpu.", res.Pods[1].Message)
}

// A pod whose host port is free but whose CPU is short is short of CPU, not of ports.
func TestFreePortDoesNotHideTheShortResource(t *testing.T) {
	p := spec("web", map[string]string{"cpu": "2"})
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	res := plan.Plan(plan.NewSnapshot([]corev1.Node{node("a", 1, 8, 0, nil)}, nil), replicas(p, 1))
	assert.Equal(t, "0/1 nodes are available: 1 Insufficient cpu.", res.Pods[0].Message)
}

// The assumed node follows LeastAllocated, which weighs free CPU and free memory alike: each
// pair below is ordered one way by CPU and the other way by memory.
func TestAssumedNodeWeighsCPUAndMemory(t *testing.T) {
	p := replicas(spec("x", map[string]string{"cpu": "1", "memory": "1Gi"}), 1)
	// a: 7/8 + 3/4 free after placing; b: 1/2 + 15/16.
	res := plan.Plan(plan.NewSnapshot([]corev1.Node{node("a", 8, 4, 0, nil), node("b", 2, 16, 0, nil)}, nil), p)
	assert.Equal(t, "a", res.Pods[0].AssumedNode)
	// c: 3/4 + 31/32; d: 7/8 + 3/4.
	res = plan.Plan(plan.NewSnapshot([]corev1.Node{node("c", 4, 32, 0, nil), node("d", 8, 4, 0, nil)}, nil), p)
	assert.Equal(t, "c", res.Pods[0].AssumedNode)
}

// Each category's result carries its own scheduling, as `plan` prints it.
func TestCategoryResultsCarryTheirScheduling(t *testing.T) {
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, map[string]string{"polyaxon": "jobs"})}, nil)
	probes := plan.CategoryProbes(plan.RunPlacement{Categories: []plan.CategoryScheduling{
		{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "experiments"}},
		{Category: "jobs", NodeSelector: map[string]string{"polyaxon": "jobs"}},
	}}, "polyaxon")
	res := plan.Plan(snap, probes)
	require.Len(t, res.Categories, 2)
	assert.Equal(t, "nodeSelector polyaxon=experiments", res.Categories[0].Scheduling)
	assert.False(t, res.Categories[0].OK())
	assert.Equal(t, "nodeSelector polyaxon=jobs", res.Categories[1].Scheduling)
	assert.True(t, res.Categories[1].OK())
}

// A category can start runs when its probe fits for sure, or in the plan's own placement when
// the outcome depends on scoring.
func TestCategoryOK(t *testing.T) {
	for _, c := range []struct {
		verdict plan.Verdict
		assumed bool
		ok      bool
	}{{plan.Fits, true, true}, {plan.Uncertain, true, true}, {plan.Uncertain, false, false}, {plan.Unschedulable, false, false}} {
		r := plan.CategoryResult{Result: plan.PodResult{Verdict: c.verdict, AssumedFits: c.assumed}}
		assert.Equal(t, c.ok, r.OK(), "%s, assumed fits %v", c.verdict, c.assumed)
	}
}

// Feasible gives the nodes a pod fits on, in name order, and the scheduler's message when
// there is none.
func TestFeasible(t *testing.T) {
	snap := plan.NewSnapshot([]corev1.Node{node("b", 2, 8, 0, nil), node("a", 4, 8, 0, nil)}, nil)
	nodes, msg := plan.Feasible(snap, spec("x", map[string]string{"cpu": "2"}))
	assert.Equal(t, []string{"a", "b"}, nodes)
	assert.Empty(t, msg)
	nodes, msg = plan.Feasible(snap, spec("y", map[string]string{"cpu": "5"}))
	assert.Empty(t, nodes)
	assert.Equal(t, "0/2 nodes are available: 2 Insufficient cpu.", msg)
}

// The run category of a topology: its own, else experiments.
func TestTopologyRunCategory(t *testing.T) {
	assert.Equal(t, "experiments", (&plan.Topology{}).RunCategory())
	assert.Equal(t, "jobs", (&plan.Topology{Category: "jobs"}).RunCategory())
}

// Affinity falls back like the other scheduling fields: a replica's own, else its role's
// default, else the category's.
func TestTopologyAffinityFallsBack(t *testing.T) {
	topo, err := plan.ParseTopology([]byte(`
environment:
  replicas:
    n_workers: 1
    default_worker:
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [workers]}]}]}}}
`))
	require.NoError(t, err)
	defs := plan.CategoryScheduling{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"exp"}}}}}}}}}
	pods, err := topo.Pods("t", "ns", defs)
	require.NoError(t, err)
	require.Len(t, pods, 2)
	term := func(p plan.PodToPlace) string {
		require.NotNil(t, p.Pod.Spec.Affinity, p.Name)
		return p.Pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0]
	}
	assert.Equal(t, "exp", term(pods[0]), "master: the category's affinity")
	assert.Equal(t, "workers", term(pods[1]), "worker: default_worker's affinity")
}

// environment.gpu_resource names the GPU that per-gpu placement shares out; a node of the pool
// without that GPU takes no replica (and no division by its zero GPUs).
func TestPerGPUPlacementOnAnotherGPUResource(t *testing.T) {
	amd := node("amd", 16, 64, 0, map[string]string{"polyaxon": "gpu"})
	amd.Status.Allocatable["amd.com/gpu"] = *resource.NewQuantity(2, resource.DecimalSI)
	snap := plan.NewSnapshot([]corev1.Node{amd, node("cpu", 16, 64, 0, map[string]string{"polyaxon": "gpu"})}, nil)
	topo, err := plan.ParseTopology([]byte(`
environment:
  gpu_resource: amd.com/gpu
  placement: {mode: per-gpu}
  replicas: {n_workers: 2}
`))
	require.NoError(t, err)
	pods, err := topo.Pods("r", "ns", plan.CategoryScheduling{NodeSelector: map[string]string{"polyaxon": "gpu"}})
	require.NoError(t, err)
	res := plan.Plan(snap, pods)
	master := byName(t, res, "r-master-0")
	assert.Equal(t, plan.Fits, master.Verdict)
	assert.Equal(t, "amd", master.Node)
	assert.Equal(t, map[string]string{"cpu": "8", "memory": "32Gi", "amd.com/gpu": "1"}, master.Requests, "half of the node: one of its two GPUs")
	assert.Equal(t, plan.Fits, byName(t, res, "r-worker-0").Verdict)
	assert.Equal(t, plan.Unschedulable, byName(t, res, "r-worker-1").Verdict, "3 processes, 2 GPUs")
}

// Past 64 nodes the bounds alone decide, over node sets that span several 64-bit words. Here
// the pods' nodes are all past the first 64: a pod that fills a node takes two slots of the
// next class (capped by what one node holds), so the third small pod is uncertain, and the
// bounds never contradict the plan's own placement.
func TestBoundsPastTheFirst64Nodes(t *testing.T) {
	var nodes []corev1.Node
	for i := 0; i < 64; i++ {
		nodes = append(nodes, node("other-"+itoa(100+i), 2, 8, 0, map[string]string{"pool": "other"}))
	}
	nodes = append(nodes, node("w1", 2, 8, 0, map[string]string{"pool": "w"}), node("w2", 2, 8, 0, map[string]string{"pool": "w"}))
	onW := func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeSelector = map[string]string{"pool": "w"}; return p }
	pods := append(replicas(onW(spec("big", map[string]string{"cpu": "2"})), 1), replicas(onW(spec("small", map[string]string{"cpu": "1"})), 3)...)
	res := plan.Plan(plan.NewSnapshot(nodes, nil), pods)
	for i, want := range []plan.Verdict{plan.Fits, plan.Fits, plan.Fits, plan.Uncertain} {
		assert.Equal(t, want, res.Pods[i].Verdict, res.Pods[i].Name)
		for _, n := range res.Pods[i].Notes {
			assert.False(t, strings.HasPrefix(n, "internal:"), "%s: %s", res.Pods[i].Name, n)
		}
	}
	assert.Contains(t, res.Pods[3].Notes, "depends on which nodes the scheduler picks for earlier pods (scoring is not predicted)")
}

// A pod after one that may stay pending (an unevaluated constraint makes it uncertain) is not
// ruled out: only pods that surely fit surely take a slot.
func TestPodAfterAnUncertainOneIsNotRuledOut(t *testing.T) {
	snap := plan.NewSnapshot([]corev1.Node{node("a", 2, 8, 0, nil)}, nil)
	spread := spec("spread", map[string]string{"cpu": "2"})
	spread.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
	pods := append(replicas(spread, 1), replicas(spec("plain", map[string]string{"cpu": "2"}), 1)...)
	res := plan.Plan(snap, pods)
	assert.Equal(t, plan.Uncertain, res.Pods[0].Verdict)
	assert.Equal(t, plan.Uncertain, res.Pods[1].Verdict, "fits if the first stays pending")
}

// A pod that surely fits but may land off the nodes of a per-gpu run still counts against
// the run: the last worker fits only if that pod went elsewhere.
func TestFixedPodBeforeAPerGPURun(t *testing.T) {
	gpu := map[string]string{"polyaxon": "gpu"}
	snap := plan.NewSnapshot([]corev1.Node{node("a-other", 8, 32, 1, nil), node("g1", 8, 32, 1, gpu), node("g2", 8, 32, 1, gpu)}, nil)
	topo, err := plan.ParseTopology([]byte(`
environment:
  placement: {mode: per-gpu}
  replicas: {n_workers: 1}
`))
	require.NoError(t, err)
	run, err := topo.Pods("r", "ns", plan.CategoryScheduling{NodeSelector: gpu})
	require.NoError(t, err)
	pods := append(replicas(spec("job", map[string]string{"cpu": "1", "nvidia.com/gpu": "1"}), 1), run...)
	res := plan.Plan(snap, pods)
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict)
	assert.Equal(t, "a-other", res.Pods[0].AssumedNode)
	assert.Equal(t, plan.Fits, byName(t, res, "r-master-0").Verdict)
	w := byName(t, res, "r-worker-0")
	assert.Equal(t, plan.Uncertain, w.Verdict, "the job may take g1 or g2")
	assert.True(t, w.AssumedFits)
}

// While a pod is resized in place, the scheduler counts the larger of its spec and its
// status: pod-level resources too.
func TestPodLevelResizeCountsTheStatus(t *testing.T) {
	resized := boundPod("resized", "a", nil)
	resized.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	resized.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	resized.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, nil)}, []corev1.Pod{resized})
	res := plan.Plan(snap, replicas(spec("x", map[string]string{"cpu": "2"}), 1))
	assert.Equal(t, plan.Unschedulable, res.Pods[0].Verdict, "3 of 4 cores are taken, not 1")
}
