package plan_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// template is a pod template as the chart renders it: core components carry the role label the
// chart sets from its component declaration.
func template(component string, req map[string]string) corev1.PodTemplateSpec {
	p := spec(component, req)
	p.Labels = map[string]string{"app.kubernetes.io/component": component}
	if contract.EmbeddedComponents().IsCore(component) {
		p.Labels[contract.RoleLabel] = contract.CoreCategory
	}
	return corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
}

func daemonSet(name string, req map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{Kind: "DaemonSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "polyaxon"}, Spec: appsv1.DaemonSetSpec{Template: template(name, req)}}
}

func toObjects(objs ...runtime.Object) []runtime.Object { return objs }

func TestPodsFromObjects(t *testing.T) {
	limitsOnly := template("gateway", nil)
	limitsOnly.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("1")}}
	objs := toObjects(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: "polyaxon"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: limitsOnly}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql"},
			Spec: appsv1.StatefulSetSpec{Template: template("postgresql", map[string]string{"cpu": "250m"})}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-migrate"},
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3), Completions: ptr.To[int32](2), Template: template("migrations", nil)}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-test", Annotations: map[string]string{"helm.sh/hook": "test"}},
			Spec: batchv1.JobSpec{Template: template("x", nil)}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-cleanup"},
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template("cleanup", nil)}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ignored"}},
		daemonSet("node-agent", nil),
	)
	pods, err := plan.PodsFromObjects(objs)
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"polyaxon-gateway-0", "polyaxon-gateway-1", "polyaxon-postgresql-0",
		"polyaxon-migrate-0", "polyaxon-migrate-1", "polyaxon-cleanup-0", "node-agent"}, names)
	assert.Same(t, pods[0].Pod, pods[1].Pod, "replicas share one template")
	assert.Equal(t, "core", pods[0].Category)
	assert.Equal(t, "gateway", pods[0].Component)
	assert.Equal(t, "postgresql", pods[2].Category)
	assert.Equal(t, "core", pods[3].Category, "chart Jobs are core")
	req := pods[0].Pod.Spec.Containers[0].Resources.Requests
	assert.Equal(t, "2", req.Cpu().String(), "requests default to limits as the API server does")
	assert.Equal(t, "1", ptr.To(req["nvidia.com/gpu"]).String())
}

func TestPodsFromUnstructuredManifests(t *testing.T) {
	manifest := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: polyaxon-operator, namespace: polyaxon}
spec:
  replicas: 1
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app.kubernetes.io/component: operator}}
    spec:
      nodeSelector: {polyaxon: core}
      containers:
      - name: manager
        image: polyaxon/polyaxon-operator
        resources: {requests: {cpu: 100m, memory: 128Mi}}
`
	objs, err := plan.DecodeManifests(strings.NewReader(manifest))
	require.NoError(t, err)
	pods, err := plan.PodsFromObjects(objs)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	assert.Equal(t, "polyaxon-operator-0", pods[0].Name)
	assert.Equal(t, map[string]string{"polyaxon": "core"}, pods[0].Pod.Spec.NodeSelector)

}

// Edges of the replica counts and of the manifest reader.
func TestPodsFromObjectsEdges(t *testing.T) {
	job := func(name string, parallelism, completions *int32, suspend bool) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "polyaxon"},
			Spec: batchv1.JobSpec{Parallelism: parallelism, Completions: completions, Suspend: ptr.To(suspend), Template: template("migrations", nil)}}
	}
	withInit := template("api", nil)
	withInit.Namespace = "other"
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}
	objs := toObjects(
		job("same", ptr.To[int32](2), ptr.To[int32](2), false),
		job("more-completions", ptr.To[int32](2), ptr.To[int32](5), false),
		job("default", nil, nil, false),
		job("suspended", ptr.To[int32](2), nil, true),
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "paused"}, Spec: batchv1.CronJobSpec{Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template("cleanup", nil)}}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hook", Annotations: map[string]string{"helm.sh/hook": "pre-install, test-success"}},
			Spec: batchv1.JobSpec{Template: template("x", nil)}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "polyaxon"}, Spec: appsv1.ReplicaSetSpec{Template: withInit}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "polyaxon"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0),
			Template: template("postgresql", nil)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "polyaxon", Labels: map[string]string{"app.kubernetes.io/component": "tool"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}},
	)
	pods, err := plan.PodsFromObjects(objs)
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"same-0", "same-1", "more-completions-0", "more-completions-1", "default-0", "rs-0", "bare"}, names,
		"parallelism at most completions; suspended, paused, zero-replica and Helm test pods start nothing")
	assert.Equal(t, 1, pods[1].Index)
	rs := pods[5]
	assert.Equal(t, "ReplicaSet", rs.Kind)
	assert.Equal(t, "other", rs.Pod.Namespace, "the template's own namespace wins")
	assert.Equal(t, "polyaxon", pods[0].Pod.Namespace, "else the owner's")
	assert.Equal(t, "64Mi", rs.Pod.Spec.InitContainers[0].Resources.Requests.Memory().String(), "init containers' requests default to limits too")
	assert.Equal(t, "Pod", pods[6].Kind)
	assert.Equal(t, "tool", pods[6].Category, "a component's pods go to its own category")

	objs, err = plan.DecodeManifests(strings.NewReader(`
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{name: c}]}}
---
{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"}, "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}}}
`))
	require.NoError(t, err)
	pods, err = plan.PodsFromObjects(objs)
	require.NoError(t, err)
	names = nil
	for _, p := range pods {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"a", "b", "nightly-0", "nightly-1"}, names, "list items, and a CronJob's run")

	_, err = plan.DecodeManifests(strings.NewReader("kind: Pod\n---\n[unclosed\n"))
	assert.ErrorContains(t, err, "decoding manifest document 1")
	objs, err = plan.DecodeManifests(strings.NewReader("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: many}\n"))
	require.NoError(t, err)
	_, err = plan.PodsFromObjects(objs)
	assert.ErrorContains(t, err, "decoding Deployment d")
}

// Where a run of each category goes is what the chart's admission policies do to a run pod of
// that category: evaluated on the production render with the API server's own code.
func TestCategoryDefaultsFollowTheChartsPolicies(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	prof, err := profile.Load("production")
	require.NoError(t, err)
	res, err := render.Render(ch, prof.Values, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"})
	require.NoError(t, err)
	var objs []runtime.Object
	for _, m := range res.Manifests {
		objs = append(objs, m.Object)
	}
	decl, err := runs.Load(ch)
	require.NoError(t, err)

	got, err := plan.CategoryDefaults(objs, decl, "polyaxon")
	require.NoError(t, err)
	assert.True(t, got.Enforced)
	assert.Equal(t, []string{"experiments", "jobs", "builds", "tensorboards", "notebooks"}, got.Names())
	exp, _ := got.Get("experiments")
	assert.Equal(t, map[string]string{"polyaxon": "experiments"}, exp.NodeSelector)
	assert.Equal(t, "nodeSelector polyaxon=experiments; tolerations [nvidia.com/gpu exists:NoSchedule]", exp.String())
	assert.Nil(t, exp.Affinity, "an empty affinity is no affinity")
	builds, _ := got.Get("builds")
	assert.Equal(t, map[string]string{"polyaxon": "builds"}, builds.NodeSelector)
	assert.Empty(t, builds.Tolerations, "builds do not tolerate the GPU taint")

	// Without policies (a cluster before 1.36): nothing places runs, and the caller is told.
	res, err = render.Render(ch, prof.Values, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon", KubeVersion: "v1.35.0"})
	require.NoError(t, err)
	objs = objs[:0]
	for _, m := range res.Manifests {
		objs = append(objs, m.Object)
	}
	got, err = plan.CategoryDefaults(objs, decl, "polyaxon")
	assert.ErrorIs(t, err, plan.ErrNoPlacementPolicies)
	assert.False(t, got.Enforced)
	exp, _ = got.Get("experiments")
	assert.Equal(t, "none", exp.String())
}

func TestCategoryFeasibility(t *testing.T) {
	nodes := []corev1.Node{
		node("core-0", 4, 16, 0, map[string]string{"polyaxon": "core"}),
		node("exp-0", 8, 32, 1, map[string]string{"polyaxon": "experiments"}, gpuTaint()),
	}
	defs := plan.RunPlacement{Enforced: true, Categories: []plan.CategoryScheduling{
		{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "experiments"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		{Category: "builds", NodeSelector: map[string]string{"polyaxon": "builds"}},
		{Category: "jobs"},
	}}
	got := plan.CategoryFeasibility(plan.NewSnapshot(nodes, nil), defs, nil)
	require.Len(t, got, 3)
	assert.True(t, got["experiments"].OK())
	assert.Equal(t, "exp-0", got["experiments"].Result.Node)
	assert.False(t, got["builds"].OK())
	assert.Equal(t, "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: }.", got["builds"].Result.Message, "taints are checked before affinity, first failure counts")
	assert.True(t, got["jobs"].OK())
	assert.Equal(t, "core-0", got["jobs"].Result.Node, "jobs has no toleration: only the untainted node")
}
