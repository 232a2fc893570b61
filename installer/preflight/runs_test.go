package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// renderProduction renders the embedded chart with the production profile plus --set style
// sets, for the cluster opts describes.
func renderProduction(t *testing.T, opts render.Options, sets ...string) *render.Result {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	prof, err := profile.Load("production")
	require.NoError(t, err)
	vals, _, err := values.BuildFiles(prof.Name, prof.Values, values.Options{Values: sets})
	require.NoError(t, err)
	opts.ReleaseName, opts.Namespace = "polyaxon", ns
	res, err := render.Render(ch, vals, opts)
	require.NoError(t, err)
	return res
}

// runCheck runs one preflight check by ID against a rendered release and a fake cluster.
func runCheck(t *testing.T, id string, rendered *render.Result, c *cluster, mapper meta.RESTMapper) check.Result {
	t.Helper()
	cl := c.clients(t)
	if mapper != nil {
		cl.mapper = meta.FirstHitRESTMapper{MultiRESTMapper: meta.MultiRESTMapper{mapper, cl.mapper}}
	}
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: testChart(t), Rendered: rendered, Policy: restricted, Clients: cl}
	for _, ch := range preflight.Checks(e) {
		if ch.ID == id {
			rep := check.NewRunner([]check.Check{ch}).Run(context.Background())
			return rep.Results[0]
		}
	}
	t.Fatalf("no check %s", id)
	return check.Result{}
}

// The chart's own policies harden a run pod as Polyaxon creates it (init and sidecar without a
// securityContext) to "restricted": the namespace can enforce it.
func TestRunPodsOfTheChartPassRestricted(t *testing.T) {
	r, err := preflight.EvaluateRunPods(renderProduction(t, render.Options{}).Objects(), runs.Embedded(), ns, "restricted")
	require.NoError(t, err)
	assert.True(t, r.Placed)
	assert.Empty(t, r.Violations)
	assert.Equal(t, "restricted", preflight.RunsEnforceLevel("restricted", r))

	res := runCheck(t, "run-placement", renderProduction(t, render.Options{}), healthy(), nil)
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Contains(t, res.Detail, "placed per category and hardened to restricted")
}

// Without the policies (a 1.35 cluster) run pods would be refused by "restricted": the check
// warns with the reason, and the namespace is to enforce "baseline" instead.
func TestRunPlacementWarnsOnOldClusters(t *testing.T) {
	old := healthy()
	old.version = "v1.35.4"
	rendered := renderProduction(t, render.Options{KubeVersion: "v1.35.4"})
	r, err := preflight.EvaluateRunPods(rendered.Objects(), runs.Embedded(), ns, "restricted")
	require.NoError(t, err)
	assert.False(t, r.Placed)
	assert.NotEmpty(t, r.Violations)
	assert.Equal(t, "baseline", preflight.RunsEnforceLevel("restricted", r))
	assert.Equal(t, "baseline", preflight.RunsEnforceLevel("baseline", r))

	res := runCheck(t, "run-placement", rendered, old, nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "Kubernetes v1.35.4 is older than 1.36")
	assert.Contains(t, res.Detail, "the categories' scheduling does not apply")
	assert.Contains(t, res.Detail, `containers "polyaxon-init-auth", "polyaxon-main", "polyaxon-sidecar" must set securityContext.allowPrivilegeEscalation=false`)
	assert.Contains(t, res.Detail, "the release labels the runs' namespace polyaxon-runs pod-security.kubernetes.io/enforce=baseline (warn and audit restricted)")
	assert.Contains(t, res.Hint, "1.36")

	// The namespace already enforces restricted (an upgrade): the upgrade relabels it, no
	// command is left for the user to run.
	old.objects[0] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	res = runCheck(t, "run-placement", rendered, old, nil)
	assert.Contains(t, res.Detail, "the release labels the runs' namespace polyaxon-runs pod-security.kubernetes.io/enforce=baseline")
	assert.NotContains(t, res.Detail, "kubectl label")

	// Runs in the release's own namespace: install and upgrade lower its enforce label.
	shared := renderProduction(t, render.Options{KubeVersion: "v1.35.4"}, "runs.namespace="+ns)
	res = runCheck(t, "run-placement", shared, old, nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "install and upgrade label namespace polyaxon pod-security.kubernetes.io/enforce=baseline (warn and audit restricted) so that runs are admitted")
	assert.NotContains(t, res.Detail, "the release labels the runs' namespace")
}

func TestRunPlacementNamesWhyThereAreNoPolicies(t *testing.T) {
	res := runCheck(t, "run-placement", renderProduction(t, render.Options{}, "runs.admissionPolicies.enabled=false"), healthy(), nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "runs.admissionPolicies.enabled is false")

	// 1.37 whose API server does not serve the kinds (switched off): discovery decides.
	d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &kversion.Info{GitVersion: "v1.37.2", Major: "1", Minor: "37"}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod"}}}}
	caps, err := render.ClusterCapabilities(context.Background(), d)
	require.NoError(t, err)
	res = runCheck(t, "run-placement", renderProduction(t, render.Options{Cluster: caps}), healthy(), nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "the API server (v1.37.2) does not serve admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")

	// Policies present but hardening off: placed, yet refused by restricted.
	rendered := renderProduction(t, render.Options{}, "securityContext.enabled=false")
	r, err := preflight.EvaluateRunPods(rendered.Objects(), runs.Embedded(), ns, "restricted")
	require.NoError(t, err)
	assert.True(t, r.Placed)
	assert.True(t, r.Refused())
	res = runCheck(t, "run-placement", rendered, healthy(), nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.NotContains(t, res.Detail, "scheduling does not apply")
	assert.Contains(t, res.Detail, "enforce=baseline")
}

var kubeflowMapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"PyTorchJob", "TFJob", "MPIJob"} {
		m.Add(schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	m.Add(schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}, meta.RESTScopeNamespace)
	return m
}()

func TestDistributedBackends(t *testing.T) {
	res := runCheck(t, "distributed-backends", renderProduction(t, render.Options{}), healthy(), nil)
	assert.Equal(t, check.Skipped, res.Status, "no operators.* on: %s", res.Detail)

	pytorch := renderProduction(t, render.Options{}, "operators.pytorchjob=true")
	res = runCheck(t, "distributed-backends", pytorch, healthy(), nil)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "operators.pytorchjob is true but the cluster does not serve PyTorchJob (kubeflow.org/v1)")
	assert.Contains(t, res.Detail, "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.8.1")
	assert.Contains(t, res.Detail, "or set operators.pytorchjob=false")

	res = runCheck(t, "distributed-backends", pytorch, healthy(), kubeflowMapper)
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "served: PyTorchJob", res.Detail)

	// Ray needs what Polyaxon creates (RayJob) and what KubeRay makes of it (RayCluster).
	ray := renderProduction(t, render.Options{}, "operators.raycluster=true", "operators.tfjob=true")
	res = runCheck(t, "distributed-backends", ray, healthy(), kubeflowMapper)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "operators.raycluster is true but the cluster does not serve RayJob (ray.io/v1)")
	assert.NotContains(t, res.Detail, "TFJob")
	assert.NotContains(t, res.Detail, "RayCluster")
}

// A category whose rules match no Ready node fails its check naming the category and what it
// looked for: the labels when no node has them, the taints when the labelled nodes refuse it.
func TestSchedulingCategoryNamesWhatItLookedFor(t *testing.T) {
	c := healthy()
	c.objects = c.objects[:3] // core and experiments only: no builds node
	res := runCheck(t, "scheduling-builds", renderProduction(t, render.Options{}), c, nil)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "category builds: no Ready node has the labels its runs look for (nodeSelector polyaxon=builds); 0/2 nodes are available")
	assert.Contains(t, res.Hint, "nodeSelectors.<category>")

	// The experiments pool is tainted and the category no longer tolerates it.
	res = runCheck(t, "scheduling-experiments", renderProduction(t, render.Options{}, "tolerations.experiments=null"), healthy(), nil)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "category experiments: the Ready nodes with the labels its runs look for (gpu-1) all carry a taint they do not tolerate (nvidia.com/gpu:NoSchedule; nodeSelector polyaxon=experiments)")
	assert.Contains(t, res.Detail, "untolerated taint")
	assert.Equal(t, check.Passed, runCheck(t, "scheduling-jobs", renderProduction(t, render.Options{}, "tolerations.experiments=null"), healthy(), nil).Status,
		"jobs keep their own toleration")
}
