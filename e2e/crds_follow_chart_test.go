package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

var (
	crdsGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	kfjobsGVR = schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: "kfjobs"}
)

// crdsFollowTheChart (TestLifecycleScenarios): Helm never updates crds/, so a cluster first installed by an
// older chart keeps its CRDs; earlier charts spelt the kfjobs kind KFJob where the operator
// registers KfJob. Install and upgrade bring CRDs to the chart's. A kind cannot change in place
// (the API server refuses), so the CRD is re-created, but only once it holds no run object: a
// CRD's deletion deletes its objects.
func crdsFollowTheChart(t *testing.T) {
	c := lifecycleCluster(t)
	ns := "crds"
	dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	ch, err := loader.Load(filepath.Join(root, "charts", "polyaxon"))
	require.NoError(t, err)
	_, err = c.Clientset.CoreV1().Namespaces().Create(ctxT(t, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	rel := release.NewFromConfiguration(helmConfiguration(t, c, ns), c.Clientset, ns, releaseName)

	legacyCRD(t, c, root)
	run := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "polyaxon.com/v1", "kind": "KFJob",
		"metadata": map[string]any{"name": "legacy-run", "namespace": ns},
	}}
	// A CRD whose names are accepted is served a moment later: until then the API server
	// answers 404 for its resource.
	waitFor(t, time.Minute, "a KFJob created", func(ctx context.Context) (bool, string, error) {
		_, err := dyn.Resource(kfjobsGVR).Namespace(ns).Create(ctx, run, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, err.Error(), nil
		}
		return err == nil, "", err
	})

	res, err := rel.ApplyCRDs(ctxT(t, 2*time.Minute), ch)
	require.NoError(t, err)
	require.Len(t, res.Warnings, 1, "a CRD with runs in it is not replaced: %+v", res)
	assert.Contains(t, res.Warnings[0], "crds/legacy-run")
	assert.Equal(t, "KFJob", crdKind(t, dyn), "left as it was while it holds a run")
	_, err = dyn.Resource(kfjobsGVR).Namespace(ns).Get(ctxT(t, time.Minute), "legacy-run", metav1.GetOptions{})
	require.NoError(t, err, "the run object is kept")
	assert.Contains(t, res.Applied, "jobs.polyaxon.com", "the other CRDs are applied in place")

	require.NoError(t, dyn.Resource(kfjobsGVR).Namespace(ns).Delete(ctxT(t, time.Minute), "legacy-run", metav1.DeleteOptions{}))
	res, err = rel.ApplyCRDs(ctxT(t, 2*time.Minute), ch)
	require.NoError(t, err)
	assert.Equal(t, []string{"kfjobs.polyaxon.com"}, res.Replaced)
	assert.Empty(t, res.Warnings)
	assert.Equal(t, "KfJob", crdKind(t, dyn), "the kind the operator registers")
	waitFor(t, time.Minute, "KfJob served", func(ctx context.Context) (bool, string, error) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "polyaxon.com/v1", "kind": "KfJob",
			"metadata": map[string]any{"name": "new-run", "namespace": ns}}}
		_, err := dyn.Resource(kfjobsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// legacyCRD re-creates kfjobs.polyaxon.com as an older chart left it (kind KFJob).
func legacyCRD(t *testing.T, c *testCluster, root string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
	crds := dyn.Resource(crdsGVR)
	err := crds.Delete(ctxT(t, time.Minute), "kfjobs.polyaxon.com", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	waitFor(t, time.Minute, "old CRD gone", func(ctx context.Context) (bool, string, error) {
		_, err := crds.Get(ctx, "kfjobs.polyaxon.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", nil
	})
	b, err := os.ReadFile(filepath.Join(root, "charts/polyaxon/crds/polyaxon.com_kfjobs.yaml"))
	require.NoError(t, err)
	raw := string(b)
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "kind: KfJob", "kind: KFJob"), "listKind: KfJobList", "listKind: KFJobList")
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(raw), &obj.Object))
	_, err = crds.Create(ctxT(t, time.Minute), obj, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, time.Minute, "KFJob served", func(ctx context.Context) (bool, string, error) {
		crd, err := crds.Get(ctx, "kfjobs.polyaxon.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		kind, _, _ := unstructured.NestedString(crd.Object, "status", "acceptedNames", "kind")
		return kind == "KFJob", "accepted " + kind, nil
	})
}

func crdKind(t *testing.T, dyn dynamic.Interface) string {
	t.Helper()
	crd, err := dyn.Resource(crdsGVR).Get(ctxT(t, time.Minute), "kfjobs.polyaxon.com", metav1.GetOptions{})
	require.NoError(t, err)
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return kind
}
