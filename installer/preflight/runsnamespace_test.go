package preflight_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// runsNamespaceCheck runs check-runs-namespace under the production profile's policy against a
// cluster that also holds objs.
func runsNamespaceCheck(t *testing.T, rendered *render.Result, objs ...runtime.Object) check.Result {
	t.Helper()
	return runsNamespaceCheckIn(t, rendered, healthy(), objs...)
}

func runsNamespaceCheckIn(t *testing.T, rendered *render.Result, c *cluster, objs ...runtime.Object) check.Result {
	t.Helper()
	prof, err := profile.Load("production")
	require.NoError(t, err)
	c.objects = append(c.objects, objs...)
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: testChart(t), Rendered: rendered, Policy: prof.Policy, Clients: c.clients(t)}
	for _, ch := range preflight.Checks(e) {
		if ch.ID == "runs-namespace" {
			return check.NewRunner([]check.Check{ch}).Run(context.Background()).Results[0]
		}
	}
	t.Fatal("no check runs-namespace")
	return check.Result{}
}

// Issue 37, bad input: in production, runs never share the platform's namespace, nor one that
// holds a platform's objects; a new namespace is the release's to create.
func TestRunsNamespaceIsTheRunsOwn(t *testing.T) {
	prod := renderProduction(t, render.Options{})
	res := runsNamespaceCheck(t, prod)
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "namespace polyaxon-runs does not exist yet: the release creates it for runs", res.Detail)

	res = runsNamespaceCheck(t, renderProduction(t, render.Options{}, "runs.namespace="+ns))
	assert.Equal(t, check.Failed, res.Status)
	assert.Equal(t, `runs.namespace is "polyaxon", the release's own namespace: the profile keeps runs apart from the platform's Secrets, volumes and accounts; set runs.namespace to a namespace of their own (e.g. polyaxon-runs)`, res.Detail)

	platformLabels := map[string]string{"app.kubernetes.io/part-of": "polyaxon", "app.kubernetes.io/instance": "other", "app.kubernetes.io/component": "platform"}
	runsNS := func(annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-runs", Annotations: annotations}}
	}
	other := runsNamespaceCheck(t, prod, runsNS(nil),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-platform", Namespace: "polyaxon-runs", Labels: platformLabels}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.other.v1", Namespace: "polyaxon-runs", Labels: map[string]string{"owner": "helm", "name": "other"}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-other-postgresql-0", Namespace: "polyaxon-runs", Labels: platformLabels}})
	assert.Equal(t, check.Failed, other.Status)
	assert.Equal(t, "namespace polyaxon-runs (runs.namespace) holds a platform's objects (Helm release other, Secret other-platform, PersistentVolumeClaim data-other-postgresql-0): runs there could mount or read them; set runs.namespace to a namespace of their own", other.Detail)

	// At most five are named.
	platform := func(n int) []runtime.Object {
		objs := []runtime.Object{runsNS(nil)}
		for i := 1; i <= n; i++ {
			objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-platform-%d", i), Namespace: "polyaxon-runs", Labels: platformLabels}})
		}
		return objs
	}
	five := runsNamespaceCheck(t, prod, platform(5)...)
	assert.Equal(t, check.Failed, five.Status)
	assert.Contains(t, five.Detail, "holds a platform's objects (Secret other-platform-1, Secret other-platform-2, Secret other-platform-3, Secret other-platform-4, Secret other-platform-5): runs there")
	seven := runsNamespaceCheck(t, prod, platform(7)...)
	assert.Equal(t, check.Failed, seven.Status)
	assert.Contains(t, seven.Detail, "holds a platform's objects (Secret other-platform-1, Secret other-platform-2, Secret other-platform-3, Secret other-platform-4, Secret other-platform-5, and 2 more): runs there")

	foreign := runsNamespaceCheck(t, prod, runsNS(nil))
	assert.Equal(t, check.Failed, foreign.Status)
	assert.Contains(t, foreign.Detail, "namespace polyaxon-runs exists and is not this release's, so the release cannot create it: set runs.createNamespace=false")

	// An upgrade: the namespace and its artifacts claim are this release's.
	owned := runsNamespaceCheck(t, prod, runsNS(map[string]string{"meta.helm.sh/release-name": "polyaxon", "meta.helm.sh/release-namespace": ns}),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-artifacts", Namespace: "polyaxon-runs",
			Labels: map[string]string{"app.kubernetes.io/part-of": "polyaxon", "app.kubernetes.io/instance": "polyaxon", "app.kubernetes.io/component": "artifacts"}}})
	assert.Equal(t, check.Passed, owned.Status, owned.Detail)

	// A namespace of the user's own: it should enforce restricted.
	mine := runsNamespaceCheck(t, renderProduction(t, render.Options{}, "runs.createNamespace=false"), runsNS(nil))
	assert.Equal(t, check.Warned, mine.Status)
	assert.Contains(t, mine.Detail, `namespace polyaxon-runs (runs.createNamespace=false) enforces Pod Security "none": label it pod-security.kubernetes.io/enforce=restricted`)
}

// An upgrade that moves runs to their own namespace says what becomes of the runs made before.
func TestRunsNamespaceWarnsOfRunsLeftBehind(t *testing.T) {
	c := healthy()
	run := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "polyaxon.com/v1", "kind": "Job",
		"metadata": map[string]any{"name": "plx-operation-0f5c", "namespace": ns}}}
	c.crds = append(c.crds, run)
	res := runsNamespaceCheckIn(t, renderProduction(t, render.Options{}), c)
	assert.Equal(t, check.Warned, res.Status)
	assert.Equal(t, "1 run object(s) in namespace polyaxon were made before runs.namespace: new runs go to polyaxon-runs; finished runs stay visible in the API, but no runner watches these any more, so a run still running there stays running in the API whatever it does; stop it (`polyaxon ops stop`) or let it finish before the upgrade. Stopped after it, the run ends in the API but its pods stay until its object is deleted (kubectl -n polyaxon delete jobs.polyaxon.com,services.polyaxon.com,kfjobs.polyaxon.com,clusters.polyaxon.com NAME)", res.Detail)
}
