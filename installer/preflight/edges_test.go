package preflight_test

// Behaviour at the edges that `make mutate` found unguarded: each test here kills a mutant
// that lived (a comparison flipped or moved by one) and says what a user would notice.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// Run pods are judged at the profile's level: "baseline" admits Polyaxon's unhardened run pods
// (no policies on a 1.35 cluster), and no level at all means "restricted", which does not.
func TestRunPodsAreJudgedAtTheProfilesLevel(t *testing.T) {
	old := renderProduction(t, render.Options{KubeVersion: "v1.35.4"}).Objects()
	r, err := preflight.EvaluateRunPods(old, runs.Embedded(), ns, "baseline")
	require.NoError(t, err)
	assert.False(t, r.Placed)
	assert.Empty(t, r.Violations, "baseline admits the run pods as Polyaxon creates them")

	r, err = preflight.EvaluateRunPods(old, runs.Embedded(), ns, "")
	require.NoError(t, err, "no level is no error")
	assert.NotEmpty(t, r.Violations, "no level is restricted")
}

// 1.36 is the first release that serves MutatingAdmissionPolicy: a 1.36 cluster without it has
// the kind switched off, it is not too old.
func TestRunPlacementOn136NamesTheSwitchedOffKind(t *testing.T) {
	d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &kversion.Info{GitVersion: "v1.36.0", Major: "1", Minor: "36"}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod"}}}}
	caps, err := render.ClusterCapabilities(context.Background(), d)
	require.NoError(t, err)
	c := healthy()
	c.version = "v1.36.0"
	res := runCheck(t, "run-placement", renderProduction(t, render.Options{Cluster: caps}), c, nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "the API server (v1.36.0) does not serve admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
	assert.NotContains(t, res.Detail, "older than")
}

// A chart given with --chart declares its own dependencies: scheduling-dependencies judges the
// pods that chart calls dependencies, not those of the chart built into the binary.
func TestSchedulingDependenciesFollowTheGivenChart(t *testing.T) {
	e := env(t, healthy(), true, restricted)
	e.Chart.Files = []*chart.File{{Name: "files/components.yaml", Data: []byte("core: [gateway]\ndependencies: [redis]\n")}}
	res := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))
	assert.Equal(t, check.Skipped, res["scheduling-dependencies"].Status, "this chart's postgresql is no dependency: %s", res["scheduling-dependencies"].Detail)
}

// A category's failure names the taint its runs do not tolerate, NoExecute as much as
// NoSchedule, and lists up to five labelled nodes without an "and 0 more".
func TestCategoryFailureNamesANoExecuteTaint(t *testing.T) {
	c := healthy()
	noExecute := []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute}}
	c.objects[2] = node("gpu-1", map[string]string{"polyaxon": "experiments"}, true, noExecute, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})
	for i := 2; i <= 5; i++ {
		c.objects = append(c.objects, node(fmt.Sprintf("gpu-%d", i), map[string]string{"polyaxon": "experiments"}, true, noExecute, nil))
	}
	res := runCheck(t, "scheduling-experiments", renderProduction(t, render.Options{}), c, nil)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "category experiments: the Ready nodes with the labels its runs look for (gpu-1, gpu-2, gpu-3, gpu-4, gpu-5) all carry a taint they do not tolerate (nvidia.com/gpu:NoExecute;")
	assert.NotContains(t, res.Detail, "more")
}

// A custom resource of a CRD the release installs cannot be validated before the CRD exists:
// the dry-run says so instead of failing on a kind the cluster does not serve yet.
func TestDryRunLeavesCustomResourcesOfNewCRDsForLater(t *testing.T) {
	c := healthy()
	c.crds = nil
	e := env(t, c, true, restricted)
	u, typed, err := render.Decode([]byte("apiVersion: polyaxon.com/v1\nkind: Operation\nmetadata: {name: warmup}\n"))
	require.NoError(t, err)
	e.Rendered.Manifests = append(e.Rendered.Manifests, render.Manifest{Template: "t/op.yaml", Object: u, Typed: typed})
	res := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["dry-run"]
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Contains(t, res.Detail, "Operation warmup not validated: its CRD is installed with the release")
}

// Server-side apply needs a field manager: the dry-run names polyaxon-deploy unless the caller
// names another.
func TestDryRunFieldManager(t *testing.T) {
	c := healthy()
	check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background())
	require.NotEmpty(t, c.managers)
	for _, m := range c.managers {
		assert.Equal(t, "polyaxon-deploy", m)
	}

	c = healthy()
	e := env(t, c, true, restricted)
	e.FieldManager = "polyaxon-deploy-adopt"
	check.NewRunner(preflight.Checks(e)).Run(context.Background())
	require.NotEmpty(t, c.managers)
	for _, m := range c.managers {
		assert.Equal(t, "polyaxon-deploy-adopt", m)
	}
}

// The missing permissions are listed in order, the same on every run.
func TestRBACDenialsInOrder(t *testing.T) {
	c := healthy()
	c.deny = map[string]bool{"patch statefulsets": true, "create ingresses": true, "create deployments": true}
	res := byID(check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background()))["rbac"]
	require.Equal(t, check.Failed, res.Status)
	lines := strings.Split(res.Detail, "\n")
	assert.Len(t, lines, 3, res.Detail)
	assert.True(t, sort.StringsAreSorted(lines), res.Detail)
}

// rbac-scope names the ClusterRoles the release creates, and names none when it creates none.
func TestRBACScopeNamesTheClusterRoles(t *testing.T) {
	rendered := renderProduction(t, render.Options{}, "rbac.clusterScoped=true")
	var roles []string
	for _, m := range rendered.Manifests {
		if m.Kind() == "ClusterRole" {
			roles = append(roles, m.Name())
		}
	}
	require.NotEmpty(t, roles, "rbac.clusterScoped=true renders ClusterRoles")
	sort.Strings(roles)
	res := runCheck(t, "rbac-scope", rendered, healthy(), nil)
	assert.Equal(t, check.Warned, res.Status)
	assert.True(t, strings.HasSuffix(res.Detail, fmt.Sprintf(" (ClusterRoles %v)", roles)), res.Detail)

	e := env(t, healthy(), true, restricted) // a release without ClusterRoles
	e.Rendered.Values["rbac"] = map[string]any{"create": true, "clusterScoped": true}
	res = byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["rbac-scope"]
	assert.Equal(t, check.Warned, res.Status)
	assert.NotContains(t, res.Detail, "ClusterRoles")
}

// After a first install, the release's only record is revision 1: it is deployed.
func TestReleaseDeployedAtTheFirstRevision(t *testing.T) {
	c := healthy()
	c.objects = append(c.objects[:len(c.objects)-2], helmRecord(1, "deployed"))
	res := byID(check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background()))["release-deployed"]
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "release polyaxon revision 1 deployed", res.Detail)
}

// A profile without minGatewayReplicas asks nothing of the gateway, not even that
// gateway.replicas be set.
func TestGatewayReplicasWithoutAMinimum(t *testing.T) {
	e := env(t, healthy(), true, profile.Policy{})
	delete(e.Rendered.Values, "gateway")
	res := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["gateway-replicas"]
	assert.Equal(t, check.Skipped, res.Status, res.Detail)
	assert.Contains(t, res.Detail, "the profile sets no minimum")
}
