package plan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

func TestReasonsCountedLikeTheScheduler(t *testing.T) {
	var nodes []corev1.Node
	for i := 0; i < 8; i++ {
		nodes = append(nodes, node("gpu-"+itoa(i), 8, 32, 1, map[string]string{"polyaxon": "experiments"}, gpuTaint()))
	}
	for i := 0; i < 4; i++ {
		nodes = append(nodes, node("core-"+itoa(i), 8, 32, 0, map[string]string{"polyaxon": "core"}))
	}
	snap := plan.NewSnapshot(nodes, nil)
	p := spec("exp", map[string]string{"cpu": "1", "nvidia.com/gpu": "1"})
	p.Spec.NodeSelector = map[string]string{"polyaxon": "experiments"}

	res := plan.Plan(snap, replicas(p, 1))
	r := byName(t, res, "exp-0")
	assert.Equal(t, plan.Unschedulable, r.Verdict)
	assert.False(t, r.AssumedFits)
	assert.Equal(t, "0/12 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, 8 node(s) had untolerated taint {nvidia.com/gpu: }.", r.Message)
	assert.Equal(t, []plan.Reason{
		{Reason: "node(s) had untolerated taint {nvidia.com/gpu: }", Nodes: 8},
		{Reason: "node(s) didn't match Pod's node affinity/selector", Nodes: 4},
	}, r.Reasons)
	assert.False(t, res.Summary.OK)
	assert.Equal(t, plan.DoesNotFit, res.Conclusion())

	// Tolerating the taint makes all 8 GPU nodes feasible; the node is not predictable.
	p2 := p.DeepCopy()
	p2.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	res = plan.Plan(snap, replicas(p2, 1))
	r = res.Pods[0]
	assert.Equal(t, plan.Fits, r.Verdict)
	assert.Empty(t, r.Node, "8 feasible nodes: the plan must not claim one")
	assert.NotEmpty(t, r.AssumedNode)
	assert.Equal(t, 8, r.FeasibleNodes)
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=experiments", Nodes: 8}}, r.Pools)
	assert.Equal(t, plan.AllFit, res.Conclusion())
}

func TestTaintEffectsAndOperators(t *testing.T) {
	nodes := []corev1.Node{
		node("noexec", 4, 8, 0, nil, corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}),
		node("prefer", 4, 8, 0, nil, corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectPreferNoSchedule}),
		node("nosched", 4, 8, 0, nil, corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}),
	}
	snap := plan.NewSnapshot(nodes, nil)
	p := spec("a", map[string]string{"cpu": "1"})
	r := plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, plan.Fits, r.Verdict)
	assert.Equal(t, "prefer", r.Node, "PreferNoSchedule does not filter; the only feasible node is certain")

	// Equal with the wrong value does not tolerate; Exists with empty effect tolerates all effects.
	p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "other"}}
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, 1, r.CandidateNodes)
	p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, 3, r.CandidateNodes)
}

func TestRequiredNodeAffinityAndSelectorTogether(t *testing.T) {
	nodes := []corev1.Node{
		node("a", 4, 8, 0, map[string]string{"zone": "a", "polyaxon": "core"}),
		node("b", 4, 8, 0, map[string]string{"zone": "b", "polyaxon": "core"}),
		node("c", 4, 8, 0, map[string]string{"zone": "c"}),
	}
	p := spec("x", map[string]string{"cpu": "1"})
	p.Spec.NodeSelector = map[string]string{"polyaxon": "core"}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}}},
	}}}
	r := plan.Plan(plan.NewSnapshot(nodes, nil), replicas(p, 2)).Pods
	assert.Equal(t, "b", r[0].Node, "selector and affinity both must match: only b")
	assert.Equal(t, "b", r[1].Node, "b has room for both")
	assert.Equal(t, plan.Fits, r[1].Verdict)
}

func TestUnschedulableAndNotReadyNodes(t *testing.T) {
	cordoned := node("cordoned", 4, 8, 0, nil)
	cordoned.Spec.Unschedulable = true
	notReady := node("notready", 4, 8, 0, nil)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	unknown := node("unknown", 4, 8, 0, nil)
	unknown.Status.Conditions[0].Status = corev1.ConditionUnknown
	snap := plan.NewSnapshot([]corev1.Node{cordoned, notReady, unknown}, nil)

	p := spec("a", map[string]string{"cpu": "1"})
	res := plan.Plan(snap, replicas(p, 1))
	r := res.Pods[0]
	assert.Equal(t, plan.Unschedulable, r.Verdict)
	assert.Equal(t, "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable.", r.Message)
	assert.Equal(t, 0, res.Cluster.ReadyNodes-1, "one node reports Ready")
	assert.Equal(t, 1, res.Cluster.UnschedulableNodes)

	// The scheduler lets a pod tolerating node.kubernetes.io/unschedulable onto a cordoned node.
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, "cordoned", r.Node)

	// Without implied taints the NotReady nodes look schedulable, as they do to the scheduler
	// until the node lifecycle controller taints them.
	r = plan.Plan(plan.NewSnapshot([]corev1.Node{notReady}, nil, plan.WithoutImpliedTaints()), replicas(spec("b", nil), 1)).Pods[0]
	assert.Equal(t, plan.Fits, r.Verdict)
}

func TestGPUFitAndCapacityConsumption(t *testing.T) {
	nodes := []corev1.Node{node("g1", 16, 64, 2, nil), node("g2", 16, 64, 1, nil)}
	existing := []corev1.Pod{boundPod("old", "g2", map[string]string{"nvidia.com/gpu": "1"})}
	snap := plan.NewSnapshot(nodes, existing)
	p := spec("w", map[string]string{"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})

	res := plan.Plan(snap, replicas(p, 3))
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict)
	assert.Equal(t, "g1", res.Pods[0].Node, "g2's only GPU is taken: g1 is the one node")
	assert.Equal(t, plan.Fits, res.Pods[1].Verdict)
	assert.Equal(t, plan.Unschedulable, res.Pods[2].Verdict)
	assert.Equal(t, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", res.Pods[2].Message)
	assert.Equal(t, map[string]string{"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, res.Pods[0].Requests)
	assert.Equal(t, 1, res.Summary.Unschedulable)
}

func TestPodCountAndInitContainers(t *testing.T) {
	n := node("small", 2, 4, 0, nil)
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("2")
	snap := plan.NewSnapshot([]corev1.Node{n}, []corev1.Pod{boundPod("old", "small", nil)})

	// Pods requesting nothing are checked for the pod count only.
	res := plan.Plan(snap, replicas(spec("z", nil), 2))
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict)
	assert.Equal(t, plan.Unschedulable, res.Pods[1].Verdict)
	assert.Equal(t, "0/1 nodes are available: 1 Too many pods.", res.Pods[1].Message)

	// The effective request is max(init containers, sum of containers): 3 cores > 2.
	p := spec("i", map[string]string{"cpu": "500m"})
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
	r := plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, "0/1 nodes are available: 1 Insufficient cpu.", r.Message)
	assert.Equal(t, "3", r.Requests["cpu"])

	// Overhead counts too.
	p = spec("o", map[string]string{"cpu": "1500m"})
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, plan.Unschedulable, r.Verdict)
}

func TestUncertainWhenOrderAndScoringDecide(t *testing.T) {
	// small fits on both nodes; big only on "large". If the scheduler puts small on large, big
	// is stuck; if on "little", big fits. The plan must not pretend to know.
	snap := plan.NewSnapshot([]corev1.Node{node("large", 4, 8, 0, nil), node("little", 2, 8, 0, nil)}, nil)
	small := spec("small", map[string]string{"cpu": "2"})
	big := spec("big", map[string]string{"cpu": "4"})
	pods := append(replicas(small, 1), replicas(big, 1)...)
	res := plan.Plan(snap, pods)
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict)
	assert.Empty(t, res.Pods[0].Node)
	assert.Equal(t, "large", res.Pods[0].AssumedNode, "LeastAllocated picks the emptier node")
	assert.Equal(t, plan.Uncertain, res.Pods[1].Verdict)
	assert.Equal(t, []string{"depends on which nodes the scheduler picks for earlier pods (scoring is not predicted)"}, res.Pods[1].Notes)
	assert.False(t, res.Pods[1].AssumedFits)
	assert.False(t, res.Summary.OK)
	assert.Equal(t, plan.DoesNotFit, res.Conclusion())
}

func TestIdenticalReplicasAreExact(t *testing.T) {
	var nodes []corev1.Node
	for i := 0; i < 6; i++ {
		nodes = append(nodes, node("g"+itoa(i), 8, 32, 1, map[string]string{"polyaxon": "gpu"}))
	}
	p := spec("w", map[string]string{"cpu": "1", "nvidia.com/gpu": "1"})
	res := plan.Plan(plan.NewSnapshot(nodes, nil), replicas(p, 7))
	for i := 0; i < 6; i++ {
		assert.Equal(t, plan.Fits, res.Pods[i].Verdict, "replica %d", i)
	}
	assert.Equal(t, plan.Unschedulable, res.Pods[6].Verdict)
	assert.Equal(t, 0, res.Summary.Uncertain)
}

func TestHostPortsConflict(t *testing.T) {
	used := boundPod("old", "a", nil)
	used.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, nil), node("b", 4, 8, 0, nil)}, []corev1.Pod{used})
	p := spec("web", map[string]string{"cpu": "100m"})
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	res := plan.Plan(snap, replicas(p, 2))
	assert.Equal(t, "b", res.Pods[0].Node)
	assert.Equal(t, plan.Unschedulable, res.Pods[1].Verdict)
	assert.Equal(t, "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports.", res.Pods[1].Message)
}

func TestUnevaluatedConstraintsMakeFitsUncertain(t *testing.T) {
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, nil)}, nil)
	p := spec("x", map[string]string{"cpu": "1"})
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
	r := plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, plan.Uncertain, r.Verdict)
	assert.True(t, r.AssumedFits)
	assert.Contains(t, r.Notes[0], "topology spread")
}

func TestDaemonSetsGoFirstOnEveryEligibleNode(t *testing.T) {
	cordoned := node("c", 1, 8, 0, nil)
	cordoned.Spec.Unschedulable = true
	nodes := []corev1.Node{node("a", 1, 8, 0, nil), cordoned, node("t", 1, 8, 0, nil, gpuTaint())}
	ds := plan.PodToPlace{}
	objs, err := plan.PodsFromObjects(toObjects(daemonSet("agent", map[string]string{"cpu": "600m"})))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	ds = objs[0]
	later := replicas(spec("x", map[string]string{"cpu": "600m"}), 1)
	res := plan.Plan(plan.NewSnapshot(nodes, nil), append(later, ds))
	require.Len(t, res.Pods, 2)
	d := res.Pods[0]
	require.NotNil(t, d.DaemonSet)
	assert.Equal(t, 2, d.DaemonSet.EligibleNodes, "cordoned is tolerated by DaemonSet pods, the tainted node is not")
	assert.Equal(t, 2, d.DaemonSet.Fitting)
	assert.Equal(t, plan.Unschedulable, res.Pods[1].Verdict, "the DaemonSet took the room on a")
}

// Every constraint the plan does not evaluate is named in the pod's notes, once.
func TestNotesNameEachUnevaluatedConstraint(t *testing.T) {
	blocker := boundPod("blocker", "a", nil)
	blocker.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}}}
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, nil)}, []corev1.Pod{blocker})

	p := spec("x", map[string]string{"cpu": "1"})
	term := corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}}}
	p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway},
		{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule},
		{MaxSkew: 1, TopologyKey: "host", WhenUnsatisfiable: corev1.DoNotSchedule},
	}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
	}
	p.Spec.PriorityClassName = "high"
	y := spec("y", map[string]string{"cpu": "1"})
	y.Spec.Affinity = blocker.Spec.Affinity
	r := plan.Plan(snap, append(replicas(p, 1), replicas(y, 1)...)).Pods[0]
	assert.Equal(t, plan.Uncertain, r.Verdict)
	assert.Equal(t, []string{
		"required pod affinity (not evaluated)",
		"required pod anti-affinity (not evaluated)",
		"topology spread constraint with DoNotSchedule (not evaluated)",
		"scheduling gates: the pod waits until they are removed",
		"dynamic resource claims (not evaluated)",
		"an existing pod's required anti-affinity selects this pod (not evaluated)",
		"another planned pod's required anti-affinity selects this pod (not evaluated)",
		"assumes volume data binds on the chosen node (volume binding not evaluated)",
		"assumes volume tmp binds on the chosen node (volume binding not evaluated)",
		"priority class high: preemption of lower-priority pods not modelled",
	}, r.Notes)

	plain := spec("z", map[string]string{"cpu": "1"})
	plain.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{}}
	plain.Spec.TopologySpreadConstraints = p.Spec.TopologySpreadConstraints[:1]
	r = plan.Plan(snap, replicas(plain, 1)).Pods[0]
	assert.Equal(t, plan.Fits, r.Verdict, "empty affinity terms and ScheduleAnyway spreads decide nothing")
	assert.Empty(t, r.Notes)
}

// A pod bound to a node by name goes there or nowhere; a cordoned node takes only pods that
// tolerate the unschedulable taint.
func TestNodeNameAndCordon(t *testing.T) {
	cordoned := node("c", 4, 8, 0, nil)
	cordoned.Spec.Unschedulable = true
	snap := plan.NewSnapshot([]corev1.Node{node("a", 4, 8, 0, nil), node("b", 4, 8, 0, nil), cordoned}, nil)
	p := spec("x", map[string]string{"cpu": "1"})
	p.Spec.NodeName = "b"
	r := plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, "b", r.Node)
	p.Spec.NodeName = "c"
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match the requested node name.", r.Message)
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	r = plan.Plan(snap, replicas(p, 1)).Pods[0]
	assert.Equal(t, "c", r.Node)
}

// The plan's own placement: the feasible node with the most free CPU and memory (ties to the
// first by name); feasible nodes counted by pool, largest first, then by name.
func TestAssumedPlacementAndPoolCounts(t *testing.T) {
	nodes := []corev1.Node{
		node("a1", 4, 8, 0, map[string]string{"polyaxon": "a"}), node("a2", 4, 8, 0, map[string]string{"polyaxon": "a"}),
		node("b1", 4, 8, 0, map[string]string{"polyaxon": "b"}), node("b2", 4, 8, 0, map[string]string{"polyaxon": "b"}),
		node("c1", 8, 8, 0, map[string]string{"polyaxon": "c"}),
		node("d1", 4, 16, 0, map[string]string{"polyaxon": "d"}), node("d2", 4, 8, 0, map[string]string{"polyaxon": "d"}),
		node("d3", 4, 8, 0, map[string]string{"polyaxon": "d"}),
	}
	busy := []corev1.Pod{boundPod("busy", "c1", map[string]string{"cpu": "6"}), boundPod("full", "d1", map[string]string{"memory": "12Gi"})}
	res := plan.Plan(plan.NewSnapshot(nodes, busy), replicas(spec("x", map[string]string{"cpu": "1", "memory": "1Gi"}), 2))
	x0, x1 := res.Pods[0], res.Pods[1]
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=d", Nodes: 3}, {Pool: "polyaxon=a", Nodes: 2}, {Pool: "polyaxon=b", Nodes: 2}, {Pool: "polyaxon=c", Nodes: 1}}, x0.Pools)
	assert.Equal(t, 8, x0.FeasibleNodes)
	assert.Equal(t, 8, x0.CandidateNodes)
	assert.Equal(t, "a1", x0.AssumedNode, "equal scores: the first node by name")
	assert.Equal(t, "polyaxon=a", x0.Pool)
	assert.Equal(t, "a2", x1.AssumedNode, "a1 has less free now")
	assert.Equal(t, map[string]string{"cpu": "1", "memory": "1Gi"}, x0.Requests)

	// Memory counts as much as CPU: d1 (16Gi, 12Gi used) scores below the 8Gi nodes with CPU alike.
	small := []corev1.Node{nodes[5], nodes[6]}
	r := plan.Plan(plan.NewSnapshot(small, busy), replicas(spec("y", map[string]string{"cpu": "1"}), 1)).Pods[0]
	assert.Equal(t, "d2", r.AssumedNode)
	// CPU alone decides between nodes with equal memory: c1 (8 cores, 6 used) loses to a1.
	r = plan.Plan(plan.NewSnapshot([]corev1.Node{nodes[4], nodes[0]}, busy), replicas(spec("y", map[string]string{"memory": "1Gi"}), 1)).Pods[0]
	assert.Equal(t, "a1", r.AssumedNode)
}

// A DaemonSet that lacks room on some eligible nodes says on how many, and which.
func TestDaemonSetShortOfRoom(t *testing.T) {
	var nodes []corev1.Node
	var busy []corev1.Pod
	for i := 0; i < 23; i++ {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, 1, 8, 0, nil))
		if i > 0 {
			busy = append(busy, boundPod("busy-"+name, name, map[string]string{"cpu": "1"}))
		}
	}
	objs, err := plan.PodsFromObjects(toObjects(daemonSet("agent", map[string]string{"cpu": "100m"})))
	require.NoError(t, err)
	r := plan.Plan(plan.NewSnapshot(nodes, busy), objs).Pods[0]
	assert.Equal(t, plan.Unschedulable, r.Verdict)
	assert.False(t, r.AssumedFits)
	assert.Equal(t, "22 of 23 eligible node(s) lack room for the DaemonSet pod", r.Message)
	assert.Equal(t, 23, r.DaemonSet.EligibleNodes)
	assert.Equal(t, 1, r.DaemonSet.Fitting)
	assert.Len(t, r.DaemonSet.Unfit, 20, "at most 20 named")
	assert.Equal(t, "n01", r.DaemonSet.Unfit[0])
	assert.Equal(t, []plan.PoolCount{{Pool: "(no pool label)", Nodes: 1}}, r.Pools)
	assert.Equal(t, map[string]string{"cpu": "100m"}, r.Requests)

	r = plan.Plan(plan.NewSnapshot(nodes[:1], nil), objs).Pods[0]
	assert.Equal(t, plan.Fits, r.Verdict)
	assert.Empty(t, r.Message)
	assert.Empty(t, r.DaemonSet.Unfit)
}

// Replicas whose required anti-affinity keeps them one per node (CloudNativePG's instances) are
// placed one per node, and the one without a node of its own gets the scheduler's reason.
func TestSelfAntiAffinityKeepsReplicasOnePerNode(t *testing.T) {
	p := spec("db", map[string]string{"cpu": "100m"})
	p.Labels = map[string]string{"cnpg.io/cluster": "db", "cnpg.io/podRole": "instance"}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}}}
	snap := plan.NewSnapshot([]corev1.Node{node("a", 8, 32, 0, nil), node("b", 8, 32, 0, nil)}, nil)
	res := plan.Plan(snap, replicas(p, 3))
	nodes := map[string]bool{}
	for _, r := range res.Pods[:2] {
		assert.Equal(t, plan.Fits, r.Verdict, r.Name)
		assert.Empty(t, r.Notes, "the anti-affinity is evaluated, not noted")
		nodes[r.Node+r.AssumedNode] = true
	}
	assert.Len(t, nodes, 2, "two replicas, two nodes")
	assert.Equal(t, plan.Unschedulable, res.Pods[2].Verdict)
	assert.Equal(t, "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.", res.Pods[2].Message)

	// A pod already on a node that the term selects (an instance of the same Cluster) takes
	// that node's slot.
	running := boundPod("db-1", "a", nil)
	running.Labels = p.Labels
	res = plan.Plan(plan.NewSnapshot([]corev1.Node{node("a", 8, 32, 0, nil), node("b", 8, 32, 0, nil)}, []corev1.Pod{running}), replicas(p, 2))
	assert.Equal(t, "b", res.Pods[0].Node)
	assert.Equal(t, plan.Unschedulable, res.Pods[1].Verdict)

	// A pod of another namespace with those labels is not one the term counts.
	elsewhere := boundPod("db-1", "a", nil)
	elsewhere.Labels, elsewhere.Namespace = p.Labels, "staging"
	res = plan.Plan(plan.NewSnapshot([]corev1.Node{node("a", 8, 32, 0, nil)}, []corev1.Pod{elsewhere}), replicas(p, 1))
	assert.Equal(t, plan.Fits, res.Pods[0].Verdict, "kube-scheduler counts the pod's own namespace only")

	// A term that also selects a planned pod without the same term is not evaluated: neither
	// pod is sure.
	other := spec("other", map[string]string{"cpu": "100m"})
	other.Labels = map[string]string{"cnpg.io/cluster": "db", "cnpg.io/podRole": "instance", "extra": "x"}
	res = plan.Plan(plan.NewSnapshot([]corev1.Node{node("a", 8, 32, 0, nil)}, nil), append(replicas(other, 1), replicas(p, 1)...))
	assert.Equal(t, plan.Uncertain, res.Pods[0].Verdict)
	assert.Equal(t, plan.Uncertain, res.Pods[1].Verdict)
	assert.Contains(t, res.Pods[1].Notes, "required pod anti-affinity (not evaluated)")

	// On another topology key (zones) it stays a note.
	p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = corev1.LabelTopologyZone
	res = plan.Plan(snap, replicas(p, 1))
	assert.Equal(t, plan.Uncertain, res.Pods[0].Verdict)
	assert.Contains(t, res.Pods[0].Notes, "required pod anti-affinity (not evaluated)")
}
