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
	snap, err := plan.LoadSnapshot(context.Background(), cs, plan.WithExcludedRelease("polyaxon"))
	require.NoError(t, err)
	assert.Equal(t, int64(500), snap.Node("a").Requested.MilliCPU)
	assert.Equal(t, 1, snap.ExistingPods)
	assert.Equal(t, 2, snap.APICalls)
}
