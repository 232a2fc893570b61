package plan_test

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// The runs' quota a release renders, read from its objects: the ResourceQuota and the
// container LimitRange of the runs' namespace (the agent's POLYAXON_K8S_NAMESPACE); the plan
// carries it, as the schema says.
func TestRunsQuotaOfARenderedRelease(t *testing.T) {
	runs := map[string]string{"app.kubernetes.io/component": "runs"}
	meta := func(kind, ns string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{APIVersion: "v1", Kind: kind}, metav1.ObjectMeta{Name: "polyaxon-runs", Namespace: ns, Labels: runs}
	}
	qt, qm := meta("ResourceQuota", "polyaxon-runs")
	lt, lm := meta("LimitRange", "polyaxon-runs")
	ct := metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	objs := []runtime.Object{
		&corev1.ConfigMap{TypeMeta: ct, ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-agent", Namespace: "polyaxon"}, Data: map[string]string{"POLYAXON_K8S_NAMESPACE": "polyaxon-runs"}},
		&corev1.ResourceQuota{TypeMeta: qt, ObjectMeta: qm, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			"requests.cpu": resource.MustParse("40"), "limits.cpu": resource.MustParse("40"), "services.nodeports": resource.MustParse("0")}}},
		&corev1.LimitRange{TypeMeta: lt, ObjectMeta: lm, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{"cpu": resource.MustParse("1")}, Max: corev1.ResourceList{"cpu": resource.MustParse("16")}},
			{Type: corev1.LimitTypePersistentVolumeClaim, Max: corev1.ResourceList{"storage": resource.MustParse("1Ti")}},
		}}},
	}
	q := plan.RunsQuotaOf(objs, "polyaxon")
	require.NotNil(t, q)
	assert.Equal(t, &plan.RunsQuota{Namespace: "polyaxon-runs", Hard: map[string]string{"requests.cpu": "40", "limits.cpu": "40", "services.nodeports": "0"},
		Default: map[string]string{"cpu": "1"}, Max: map[string]string{"cpu": "16"}}, q)
	assert.Nil(t, plan.RunsQuotaOf(objs[:1], "polyaxon"), "no quota rendered")

	res := plan.Plan(plan.NewSnapshot(nil, nil), nil)
	q.SizedFrom = []plan.PoolCount{{Pool: "polyaxon=experiments", Nodes: 2}}
	q.Sized = map[string]string{"runs.quota.cpu": "40"}
	res.RunsQuota = q
	var buf bytes.Buffer
	require.NoError(t, plan.WriteJSON(&buf, res))
	inst, err := jsonschema.UnmarshalJSON(&buf)
	require.NoError(t, err)
	require.NoError(t, compileSchema(t).Validate(inst))

	buf.Reset()
	require.NoError(t, plan.WriteTable(&buf, res))
	assert.Contains(t, buf.String(), "RUNS QUOTA in namespace polyaxon-runs (totals and max sized from the run pools polyaxon=experiments (2), under the values you set)")
	assert.Regexp(t, `(?m)^requests\.cpu +40\n^limits\.cpu +40\n^services\.nodeports +0$`, buf.String())
	assert.Regexp(t, `(?m)^cpu +- +1 +16$`, buf.String())
}
