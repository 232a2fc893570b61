package release

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// The release's pods are those with its names' labels: with nameOverride, a pod of the same
// instance labelled with the chart's default name is not the release's.
func TestPlacementListsTheReleasePodsWithTheirPool(t *testing.T) {
	names := render.Names{Release: "polyaxon", Name: "platform",
		Selector: map[string]string{"app.kubernetes.io/name": "platform", "app.kubernetes.io/instance": "polyaxon"}}
	pod := func(name, component, node string, ready bool, instance string) *corev1.Pod {
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "polyaxon", Labels: map[string]string{
				"app.kubernetes.io/name": "platform", "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": component}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}},
		}
	}
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{PoolLabel: pool}}}
	}
	cs := fake.NewClientset(
		node("core-0", "core"), node("core-1", "core"),
		pod("polyaxon-gateway-a", "gateway", "core-0", true, "polyaxon"),
		withRestarts(pod("polyaxon-postgresql-0", "postgresql", "core-1", false, "polyaxon"), 2, 1),
		pod("pending", "agent", "", false, "polyaxon"),
		pod("other-gateway-a", "gateway", "core-0", true, "other"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "default-name-a", Namespace: "polyaxon", Labels: map[string]string{
			"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}}},
	)
	c := &Client{name: "polyaxon", namespace: "polyaxon", kube: cs}
	got, err := c.Placement(context.Background(), names)
	require.NoError(t, err)
	require.Len(t, got, 3, "only the release's pods")
	assert.Equal(t, PodPlacement{Pod: "pending", Component: "agent", Phase: "Running"}, got[0])
	assert.Equal(t, PodPlacement{Pod: "polyaxon-gateway-a", Component: "gateway", Node: "core-0", Pool: "core", Phase: "Running", Ready: true}, got[1])
	assert.Equal(t, [][]string{
		{"pending", "agent", "-", "-", "Running, not ready", "0"},
		{"polyaxon-gateway-a", "gateway", "core-0", "polyaxon=core", "Running, ready", "0"},
		{"polyaxon-postgresql-0", "postgresql", "core-1", "polyaxon=core", "Running, not ready", "3"},
	}, PlacementRows(got))
}

// withRestarts gives p a container per count, restarted that many times.
func withRestarts(p *corev1.Pod, counts ...int32) *corev1.Pod {
	for i, n := range counts {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i), RestartCount: n})
	}
	return p
}
