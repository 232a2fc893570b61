package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// status lists each of the release's pods with its restarts, the sum of its containers'
// restart counts, as `kubectl get pods` shows them: a pod whose container restarted is seen
// at a glance, in the table and in -o json.
func TestStatusShowsEachPodsRestarts(t *testing.T) {
	fx := releaseFixture(t, "development")
	ctx := context.Background()
	names := rt.ChartNames(t, rt.Name, map[string]any{})
	_, err := fx.Clientset.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "core-0",
		Labels: map[string]string{release.PoolLabel: "core"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := func(name, component string, restarts ...int32) {
		labels := map[string]string{render.LabelComponent: component}
		for k, v := range names.Selector {
			labels[k] = v
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt.Namespace, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: "core-0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		for i, n := range restarts {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses,
				corev1.ContainerStatus{Name: "c" + string(rune('0'+i)), RestartCount: n, Ready: true})
		}
		_, err := fx.Clientset.CoreV1().Pods(rt.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod("polyaxon-gateway-a", "gateway", 0)
	pod("polyaxon-agent-b", "agent", 2, 1)

	r := runOnFixture(t, fx, "status")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var header []string
	rows := map[string][]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "POD":
			header = f
		case header != nil && len(f) > 0:
			rows[f[0]] = f
		}
	}
	require.Equal(t, []string{"POD", "COMPONENT", "NODE", "POOL", "STATE", "RESTARTS"}, header, r.stdout)
	assert.Equal(t, []string{"polyaxon-agent-b", "agent", "core-0", "polyaxon=core", "Running,", "ready", "3"}, rows["polyaxon-agent-b"], r.stdout)
	assert.Equal(t, "0", rows["polyaxon-gateway-a"][len(rows["polyaxon-gateway-a"])-1], r.stdout)

	r = runOnFixture(t, fx, "status", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var res struct {
		Data struct {
			Pods []struct {
				Pod      string `json:"pod"`
				Restarts *int   `json:"restarts"`
			} `json:"pods"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	got := map[string]int{}
	for _, p := range res.Data.Pods {
		require.NotNil(t, p.Restarts, "%s: restarts is always in the JSON, 0 too", p.Pod)
		got[p.Pod] = *p.Restarts
	}
	assert.Equal(t, map[string]int{"polyaxon-agent-b": 3, "polyaxon-gateway-a": 0}, got)
}
