package plan_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
)

func TestLoadSnapshotPaginatesWithConstantCalls(t *testing.T) {
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i := 0; i < 1200; i++ {
		name := fmt.Sprintf("n%04d", i)
		nodes = append(nodes, node(name, 8, 32, 1, map[string]string{"polyaxon": "gpu"}))
		pods = append(pods, boundPod("p-"+name, name, map[string]string{"cpu": "1", "nvidia.com/gpu": "1"}))
	}
	done := boundPod("done", "n0000", map[string]string{"cpu": "7"})
	done.Status.Phase = corev1.PodSucceeded
	pending := boundPod("pending", "", map[string]string{"cpu": "7"})
	pending.Status.Phase = corev1.PodPending
	orphan := boundPod("orphan", "gone", map[string]string{"cpu": "7"})
	withInit := boundPod("init", "n0001", map[string]string{"cpu": "1"})
	withInit.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}}
	pods = append(pods, done, pending, orphan, withInit)

	cs, calls := plantest.FakeAPI(nodes, pods)
	snap, err := plan.LoadSnapshot(context.Background(), cs, plan.WithPageSize(500))
	require.NoError(t, err)
	assert.Equal(t, 3, calls.Get("list nodes"), "1200 nodes in pages of 500")
	assert.Equal(t, 3, calls.Get("list pods"), "1204 pods in pages of 500 (the server filters phases)")
	assert.Equal(t, 6, snap.APICalls)
	assert.Equal(t, 6, calls.Total(), "nothing but the two LIST chains")
	assert.Len(t, snap.Nodes, 1200)
	assert.Equal(t, 1201, snap.ExistingPods)
	assert.Equal(t, 1, snap.OrphanPods)

	n0 := snap.Node("n0000")
	require.NotNil(t, n0)
	assert.Equal(t, int64(1000), n0.Requested.MilliCPU, "the Succeeded pod does not count")
	assert.Equal(t, int64(1), n0.Requested.Scalar["nvidia.com/gpu"])
	assert.Equal(t, 1, n0.Pods)
	n1 := snap.Node("n0001")
	assert.Equal(t, int64(6000), n1.Requested.MilliCPU, "1 + max(init 5, 1)")
	assert.Equal(t, 2, n1.Pods)

	// Node count does not change the number of calls beyond pages.
	cs, calls = plantest.FakeAPI(nodes[:10], pods[:10])
	_, err = plan.LoadSnapshot(context.Background(), cs)
	require.NoError(t, err)
	assert.Equal(t, 2, calls.Total())
}

func TestLoadSnapshotWithPlainFakeAndExcludedRelease(t *testing.T) {
	n := node("a", 4, 8, 0, nil)
	mine := boundPod("polyaxon-gateway-abc", "a", map[string]string{"cpu": "3"})
	mine.Labels = map[string]string{"app.kubernetes.io/instance": "polyaxon", "app.kubernetes.io/name": "polyaxon"}
	other := boundPod("other", "a", map[string]string{"cpu": "500m"})
	// The plain fake ignores limit/continue and field selectors: the client-side filter still holds.
	failed := boundPod("failed", "a", map[string]string{"cpu": "3"})
	failed.Status.Phase = corev1.PodFailed
	cs := fake.NewClientset(&n, &mine, &other, &failed)
	snap, err := plan.LoadSnapshot(context.Background(), cs, plan.WithExcludedRelease(map[string]string{"app.kubernetes.io/instance": "polyaxon", "app.kubernetes.io/name": "polyaxon"}))
	require.NoError(t, err)
	assert.Equal(t, int64(500), snap.Node("a").Requested.MilliCPU)
	assert.Equal(t, 1, snap.ExistingPods)
	assert.Equal(t, 2, snap.APICalls)

	// A release with no labels excludes nothing: an empty selector would match every pod.
	snap, err = plan.LoadSnapshot(context.Background(), cs, plan.WithExcludedRelease(nil))
	require.NoError(t, err)
	assert.Equal(t, int64(3500), snap.Node("a").Requested.MilliCPU)
	assert.Equal(t, 2, snap.ExistingPods)
}

// What `plan` prints about the cluster before any planned pod: nodes by state, pools with
// allocatable and free resources (hugepages left out), and what each node's filters will see.
func TestClusterAsRead(t *testing.T) {
	gpu := node("b-gpu", 8, 32, 2, map[string]string{"polyaxon": "gpu"})
	gpu.Status.Allocatable["hugepages-2Mi"] = resource.MustParse("1Gi")
	cordoned := node("a-core", 4, 8, 0, map[string]string{"polyaxon": "core"})
	cordoned.Spec.Unschedulable = true
	notReady := node("c-core", 4, 8, 0, map[string]string{"polyaxon": "core"})
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	pressure := node("d-mem", 2, 4, 0, nil, corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule})
	pressure.Status.Conditions = append(pressure.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},
		corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue})
	unknown := node("e-lost", 2, 4, 0, nil)
	unknown.Status.Conditions[0].Status = corev1.ConditionUnknown

	withPort := boundPod("proxy", "d-mem", map[string]string{"cpu": "1"})
	withPort.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP}, {HostPort: 8080}}
	withPort.Spec.InitContainers = []corev1.Container{{Name: "i", Ports: []corev1.ContainerPort{{HostPort: 9090}}}}
	done := boundPod("done", "b-gpu", map[string]string{"cpu": "4"})
	done.Status.Phase = corev1.PodSucceeded
	pods := []corev1.Pod{
		boundPod("train", "b-gpu", map[string]string{"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1"}),
		boundPod("api", "a-core", map[string]string{"cpu": "500m"}),
		withPort, done,
		boundPod("elsewhere", "gone", map[string]string{"cpu": "1"}),
	}
	snap := plan.NewSnapshot([]corev1.Node{gpu, cordoned, notReady, pressure, unknown}, pods)

	var names []string
	for _, n := range snap.Nodes {
		names = append(names, n.Node.Name)
	}
	assert.Equal(t, []string{"a-core", "b-gpu", "c-core", "d-mem", "e-lost"}, names, "nodes in name order")
	assert.Equal(t, 3, snap.ExistingPods, "finished pods and pods on unlisted nodes do not count")
	assert.Equal(t, 1, snap.OrphanPods)
	assert.Equal(t, []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}, snap.Node("c-core").ImpliedTaints)
	assert.Equal(t, []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}, snap.Node("e-lost").ImpliedTaints)
	assert.Equal(t, []corev1.Taint{{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule}}, snap.Node("d-mem").ImpliedTaints,
		"a taint the node already carries is not implied twice")
	assert.Len(t, snap.Node("d-mem").Node.Spec.Taints, 2)
	assert.Empty(t, snap.Node("b-gpu").ImpliedTaints)
	assert.Equal(t, []plan.HostPort{{Protocol: corev1.ProtocolUDP, Port: 53}, {Protocol: corev1.ProtocolTCP, Port: 8080}, {Protocol: corev1.ProtocolTCP, Port: 9090}},
		snap.Node("d-mem").HostPorts, "host ports of containers and init containers; TCP when no protocol is given")
	assert.Equal(t, int64(1), snap.Node("b-gpu").Requested.Scalar["nvidia.com/gpu"])
	assert.Nil(t, snap.Node("c-core").Node.Status.Allocatable, "the snapshot keeps only what the filters read")
	assert.Len(t, plan.NewSnapshot([]corev1.Node{gpu, gpu}, nil).Nodes, 1, "a node listed twice is one node")
	exact := plan.NewSnapshot([]corev1.Node{notReady}, nil, plan.WithoutImpliedTaints())
	assert.Empty(t, exact.Nodes[0].ImpliedTaints)
	assert.Empty(t, exact.Nodes[0].Node.Spec.Taints)

	res := plan.Plan(snap, nil)
	assert.Equal(t, plan.ClusterSummary{Nodes: 5, ReadyNodes: 3, UnschedulableNodes: 1, ExistingPods: 3, Pools: []plan.PoolSummary{
		{Pool: "(no pool label)", Nodes: 2,
			Allocatable: map[string]string{"cpu": "4", "memory": "8Gi", "pods": "220"},
			Free:        map[string]string{"cpu": "3", "memory": "8Gi", "pods": "219"}},
		{Pool: "polyaxon=core", Nodes: 2,
			Allocatable: map[string]string{"cpu": "8", "memory": "16Gi", "pods": "220"},
			Free:        map[string]string{"cpu": "7500m", "memory": "16Gi", "pods": "219"}},
		{Pool: "polyaxon=gpu", Nodes: 1,
			Allocatable: map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"},
			Free:        map[string]string{"cpu": "6500m", "memory": "30Gi", "pods": "109", "nvidia.com/gpu": "1"}},
	}}, res.Cluster)
}
