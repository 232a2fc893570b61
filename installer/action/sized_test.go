package action_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// poolNode is a Ready node of the e2e demo's shape (e2e/cluster DefaultNodePools).
func poolNode(name, pool, cpu, mem string, gpus int64, taints ...corev1.Taint) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	if gpus > 0 {
		alloc["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"polyaxon": pool}},
		Spec: corev1.NodeSpec{Taints: taints}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func demoCluster() []corev1.Node {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	return []corev1.Node{
		poolNode("core-0", "core", "8", "32Gi", 0), poolNode("core-1", "core", "8", "32Gi", 0),
		poolNode("experiments-0", "experiments", "16", "64Gi", 4, gpu), poolNode("experiments-1", "experiments", "16", "64Gi", 4, gpu),
		poolNode("builds-0", "builds", "8", "16Gi", 0),
	}
}

func planOn(t *testing.T, nodes []corev1.Node, g action.Given) *action.PlanResult {
	t.Helper()
	cs, _ := plantest.FakeAPI(nodes, nil)
	res, err := (&action.Plan{Clients: clients{cs}, Given: g, Render: render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"}}).Run(context.Background())
	require.NoError(t, err)
	return res
}

// `plan --profile production` sizes the runs' quota from the run pools it reads and prints
// the quota the release would render; a value the user sets wins; the stored inputs stay the
// user's.
func TestPlanPrintsTheRunsQuotaSizedFromThePools(t *testing.T) {
	res := planOn(t, demoCluster(), action.Given{Profile: "production"})
	q := res.RunsQuota
	require.NotNil(t, q)
	assert.Equal(t, "polyaxon-runs", q.Namespace)
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=builds", Nodes: 1}, {Pool: "polyaxon=experiments", Nodes: 2}}, q.SizedFrom)
	for k, v := range map[string]string{"pods": "660", "requests.cpu": "80", "requests.memory": "288Gi",
		"requests.ephemeral-storage": "600Gi", "requests.nvidia.com/gpu": "16",
		"services.loadbalancers": "0", "services.nodeports": "0", "persistentvolumeclaims": "50"} {
		assert.Equal(t, v, q.Hard[k], k)
	}
	assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, q.Max)
	assert.Empty(t, q.Default, "no default limit: the max is")
	assert.Equal(t, "80", q.Sized["runs.quota.cpu"])
	assert.NotContains(t, res.Inputs.Given.Set, "runs.quota.cpu=80", "the sizing is never stored as the user's")

	var out bytes.Buffer
	require.NoError(t, plan.WriteTable(&out, res.Result))
	assert.Contains(t, out.String(), "RUNS QUOTA in namespace polyaxon-runs (totals and max sized from the run pools polyaxon=builds (1), polyaxon=experiments (2), under the values you set)")
	assert.Regexp(t, `(?m)^requests\.cpu +80$`, out.String())
	assert.Regexp(t, `(?m)^cpu +100m +max +16$`, out.String())

	// The user's values win, key by key.
	res = planOn(t, demoCluster(), action.Given{Profile: "production", Set: []string{"runs.quota.cpu=10", "runs.limitRange.max.memory=32Gi"}})
	assert.Equal(t, "10", res.RunsQuota.Hard["requests.cpu"])
	assert.Equal(t, "288Gi", res.RunsQuota.Hard["requests.memory"])
	assert.Equal(t, map[string]string{"cpu": "16", "memory": "32Gi", "ephemeral-storage": "100Gi"}, res.RunsQuota.Max)

	// No node in a run pool: the profile's totals (none), with a warning.
	res = planOn(t, demoCluster()[:2], action.Given{Profile: "production"})
	require.NotNil(t, res.RunsQuota)
	assert.Empty(t, res.RunsQuota.SizedFrom)
	assert.NotContains(t, res.RunsQuota.Hard, "requests.cpu")
	assert.Equal(t, "64", res.RunsQuota.Max["cpu"], "the profile's static max")

	// Runs in the release's namespace: no quota to size or print.
	res = planOn(t, demoCluster(), action.Given{Profile: "development"})
	assert.Nil(t, res.RunsQuota)
}
