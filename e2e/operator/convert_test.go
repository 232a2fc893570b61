package operator

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "rewrite testdata/want from the converter's output")

// Each Polyaxon resource becomes the objects in testdata/want/<name>.json (regenerate with
// `go test ./e2e/operator -run TestConvertGolden -update` and review the diff).
func TestConvertGolden(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			d, err := Convert(fixture(t, name), allEnabled)
			require.NoError(t, err)
			var objs []map[string]any
			for _, o := range d.Objects() {
				objs = append(objs, o.Object)
			}
			got, err := json.MarshalIndent(objs, "", "  ")
			require.NoError(t, err)
			path := filepath.Join("testdata", "want", name+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got))
		})
	}
}

// What every child shares: the resource's name, namespace, labels and annotations, and the
// resource as its controller.
func TestChildrenCarryTheRunsIdentity(t *testing.T) {
	for _, name := range fixtures {
		cr := fixture(t, name)
		d, err := Convert(cr, allEnabled)
		require.NoError(t, err, name)
		for _, o := range d.Objects() {
			assert.Equal(t, cr.GetNamespace(), o.GetNamespace(), name)
			assert.Equal(t, cr.GetLabels(), o.GetLabels(), name)
			assert.Equal(t, cr.GetAnnotations(), o.GetAnnotations(), name)
			assert.Equal(t, "polyaxon-runs", o.GetLabels()["app.kubernetes.io/part-of"], name)
			assert.True(t, controlledBy(o, cr), "%s: %s is controlled by the resource", name, o.GetKind())
			ref := o.GetOwnerReferences()[0]
			assert.Equal(t, "polyaxon.com/v1", ref.APIVersion)
			assert.Equal(t, cr.GetKind(), ref.Kind)
			assert.Equal(t, cr.GetName(), ref.Name)
			assert.True(t, *ref.BlockOwnerDeletion)
		}
		assert.Equal(t, cr.GetName(), d.Primary.GetName(), "child name = resource name")
	}
}

// The pod templates reach the children as Polyaxon built them, so the chart's admission
// policies see exactly its pods.
func TestPodTemplatesPassUnchanged(t *testing.T) {
	cases := []struct {
		name       string
		crPath     []string // where the template is in the resource
		childPath  []string // and in the child
		kind       string
		restartSet bool // the Job's empty restartPolicy is filled in
	}{
		{"job", []string{"batchJobSpec", "template"}, []string{"spec", "template"}, "Job", true},
		{"service", []string{"serviceSpec", "template"}, []string{"spec", "template"}, "Deployment", false},
		{"pytorchjob", []string{"pytorchJobSpec", "replicaSpecs", "Worker", "template"}, []string{"spec", "pytorchReplicaSpecs", "Worker", "template"}, "PyTorchJob", false},
		{"pytorchjob", []string{"pytorchJobSpec", "replicaSpecs", "Master", "template"}, []string{"spec", "pytorchReplicaSpecs", "Master", "template"}, "PyTorchJob", false},
		{"tfjob", []string{"tfJobSpec", "replicaSpecs", "PS", "template"}, []string{"spec", "tfReplicaSpecs", "PS", "template"}, "TFJob", false},
		{"mpijob", []string{"mpiJobSpec", "replicaSpecs", "Launcher", "template"}, []string{"spec", "mpiReplicaSpecs", "Launcher", "template"}, "MPIJob", false},
		{"raycluster", []string{"rayClusterSpec", "head", "template"}, []string{"spec", "headGroupSpec", "template"}, "RayCluster", false},
	}
	for _, tc := range cases {
		cr := fixture(t, tc.name)
		d, err := Convert(cr, allEnabled)
		require.NoError(t, err)
		assert.Equal(t, tc.kind, d.Primary.GetKind())
		want, found, err := unstructured.NestedMap(cr.Object, tc.crPath...)
		require.True(t, found && err == nil, "%s: %v", tc.name, tc.crPath)
		if tc.restartSet {
			_, set, _ := unstructured.NestedString(want, "spec", "restartPolicy")
			require.False(t, set, "Polyaxon leaves a job's restartPolicy empty")
			require.NoError(t, unstructured.SetNestedField(want, "Never", "spec", "restartPolicy"))
		}
		got, _, _ := unstructured.NestedMap(d.Primary.Object, tc.childPath...)
		assert.Equal(t, want, got, "%s %v", tc.name, tc.childPath)
	}
}

func TestJobTakesTheTermination(t *testing.T) {
	d, err := Convert(fixture(t, "job"), allEnabled)
	require.NoError(t, err)
	spec := d.Primary.Object["spec"].(map[string]any)
	assert.Equal(t, int64(2), spec["backoffLimit"])
	assert.Equal(t, int64(3600), spec["activeDeadlineSeconds"])
	assert.Equal(t, int64(600), spec["ttlSecondsAfterFinished"])
	assert.Equal(t, "batch/v1", d.Primary.GetAPIVersion())
}

func TestJobWithoutTerminationIsNotRetried(t *testing.T) {
	cr := fixture(t, "job")
	delete(cr.Object, "termination")
	d, err := Convert(cr, allEnabled)
	require.NoError(t, err)
	spec := d.Primary.Object["spec"].(map[string]any)
	assert.Equal(t, int64(0), spec["backoffLimit"])
	assert.NotContains(t, spec, "ttlSecondsAfterFinished")
}

func TestServiceIsADeploymentAndAService(t *testing.T) {
	cr := fixture(t, "service")
	d, err := Convert(cr, allEnabled)
	require.NoError(t, err)
	assert.Equal(t, deployment, d.Backend)
	assert.Equal(t, int64(2), d.Primary.Object["spec"].(map[string]any)["replicas"])
	sel, _, _ := unstructured.NestedStringMap(d.Primary.Object, "spec", "selector", "matchLabels")
	assert.Equal(t, cr.GetLabels(), sel)
	podLabels, _, _ := unstructured.NestedStringMap(d.Primary.Object, "spec", "template", "metadata", "labels")
	for k, v := range sel {
		assert.Equal(t, v, podLabels[k], "the Deployment's pods match its selector")
	}
	require.Len(t, d.Extras, 1)
	svc := d.Extras[0]
	assert.Equal(t, "Service", svc.GetKind())
	assert.Equal(t, "v1", svc.GetAPIVersion())
	assert.Equal(t, cr.GetName(), svc.GetName())
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	assert.Equal(t, []any{map[string]any{"name": "port-8888", "port": int64(8888), "targetPort": int64(8888), "protocol": "TCP"}}, ports)
}

func TestServicePortsFallBackToTheContainersThen6006(t *testing.T) {
	cr := fixture(t, "service")
	unstructured.RemoveNestedField(cr.Object, "serviceSpec", "ports")
	d, err := Convert(cr, allEnabled)
	require.NoError(t, err)
	ports, _, _ := unstructured.NestedSlice(d.Extras[0].Object, "spec", "ports")
	assert.Equal(t, int64(8888), ports[0].(map[string]any)["port"], "the main container's port")

	containers, _, _ := unstructured.NestedSlice(cr.Object, "serviceSpec", "template", "spec", "containers")
	delete(containers[0].(map[string]any), "ports")
	require.NoError(t, unstructured.SetNestedSlice(cr.Object, containers, "serviceSpec", "template", "spec", "containers"))
	d, err = Convert(cr, allEnabled)
	require.NoError(t, err)
	ports, _, _ = unstructured.NestedSlice(d.Extras[0].Object, "spec", "ports")
	assert.Equal(t, int64(6006), ports[0].(map[string]any)["port"])
}

func TestExternalServiceIsNamedExt(t *testing.T) {
	cr := fixture(t, "service")
	require.NoError(t, unstructured.SetNestedField(cr.Object, true, "serviceSpec", "isExternal"))
	d, err := Convert(cr, allEnabled)
	require.NoError(t, err)
	assert.Equal(t, cr.GetName(), d.Primary.GetName())
	assert.Equal(t, cr.GetName()+"-ext", d.Extras[0].GetName())
}

func TestKubeflowSpecs(t *testing.T) {
	d, err := Convert(fixture(t, "pytorchjob"), allEnabled)
	require.NoError(t, err)
	assert.Equal(t, "kubeflow.org/v1", d.Primary.GetAPIVersion())
	spec := d.Primary.Object["spec"].(map[string]any)
	assert.Equal(t, "2", spec["nprocPerNode"], "Polyaxon's nProcPerNode under the training operator's name")
	assert.Equal(t, map[string]any{"backoffLimit": int64(0), "cleanPodPolicy": "Running"}, spec["runPolicy"])
	assert.Equal(t, []string{"Master", "Worker"}, keys(spec["pytorchReplicaSpecs"]))

	d, err = Convert(fixture(t, "tfjob"), allEnabled)
	require.NoError(t, err)
	assert.Equal(t, "TFJob", d.Primary.GetKind())
	assert.Equal(t, []string{"Chief", "PS", "Worker"}, keys(d.Primary.Object["spec"].(map[string]any)["tfReplicaSpecs"]))

	d, err = Convert(fixture(t, "mpijob"), allEnabled)
	require.NoError(t, err)
	spec = d.Primary.Object["spec"].(map[string]any)
	assert.Equal(t, "MPIJob", d.Primary.GetKind())
	assert.Equal(t, "polyaxon-main", spec["mainContainer"])
	assert.Equal(t, int64(2), spec["slotsPerWorker"])
	assert.Equal(t, []string{"Launcher", "Worker"}, keys(spec["mpiReplicaSpecs"]))
}

func TestClusters(t *testing.T) {
	d, err := Convert(fixture(t, "raycluster"), allEnabled)
	require.NoError(t, err)
	assert.Equal(t, "ray.io/v1", d.Primary.GetAPIVersion())
	assert.Equal(t, "RayCluster", d.Primary.GetKind())
	spec := d.Primary.Object["spec"].(map[string]any)
	assert.Equal(t, "2.9.0", spec["rayVersion"])
	assert.Equal(t, map[string]any{"dashboard-host": "0.0.0.0"}, spec["headGroupSpec"].(map[string]any)["rayStartParams"])
	workers := spec["workerGroupSpecs"].([]any)
	require.Len(t, workers, 1)
	assert.Equal(t, "small", workers[0].(map[string]any)["groupName"])
	assert.Equal(t, int64(2), workers[0].(map[string]any)["replicas"])

	cr := fixture(t, "daskcluster")
	d, err = Convert(cr, allEnabled)
	require.NoError(t, err)
	assert.Equal(t, "kubernetes.dask.org/v1", d.Primary.GetAPIVersion())
	assert.Equal(t, "DaskCluster", d.Primary.GetKind())
	wantSpec, _, _ := unstructured.NestedMap(cr.Object, "daskClusterSpec", "replicaSpecs", "Worker", "template", "spec")
	gotSpec, _, _ := unstructured.NestedMap(d.Primary.Object, "spec", "worker", "spec")
	assert.Equal(t, wantSpec, gotSpec)
	replicas, _, _ := unstructured.NestedInt64(d.Primary.Object, "spec", "worker", "replicas")
	assert.Equal(t, int64(2), replicas)
	svc, _, _ := unstructured.NestedMap(d.Primary.Object, "spec", "scheduler", "service")
	assert.Equal(t, "ClusterIP", svc["type"])
}

func TestDisabledBackendsNameTheirSwitch(t *testing.T) {
	for name, want := range map[string]string{
		"tfjob":       "TFJob runs are disabled: the operator has POLYAXON_TFJOB_ENABLED unset or false",
		"pytorchjob":  "PyTorchJob runs are disabled: the operator has POLYAXON_PYTORCH_JOB_ENABLED unset or false",
		"mpijob":      "MPIJob runs are disabled: the operator has POLYAXON_MPIJOB_ENABLED unset or false",
		"raycluster":  "RayCluster runs are disabled: the operator has POLYAXON_RAY_CLUSTER_ENABLED unset or false",
		"daskcluster": "DaskCluster runs are disabled: the operator has POLYAXON_DASK_CLUSTER_ENABLED unset or false",
	} {
		_, err := Convert(fixture(t, name), Config{}.enabled)
		var disabled *DisabledError
		require.ErrorAs(t, err, &disabled, name)
		assert.EqualError(t, err, want)
	}
	for _, name := range []string{"job", "service"} {
		_, err := Convert(fixture(t, name), Config{}.enabled)
		assert.NoError(t, err, "%s needs no switch", name)
	}
}

func TestInvalidResources(t *testing.T) {
	cr := fixture(t, "job")
	delete(cr.Object, "batchJobSpec")
	_, err := Convert(cr, allEnabled)
	var bad *InvalidError
	require.ErrorAs(t, err, &bad)
	assert.Contains(t, err.Error(), "has none of the fields the operator reconciles")

	cr = fixture(t, "pytorchjob")
	unstructured.RemoveNestedField(cr.Object, "pytorchJobSpec", "replicaSpecs")
	_, err = Convert(cr, allEnabled)
	require.ErrorAs(t, err, &bad)
	assert.Contains(t, err.Error(), "the PyTorchJob spec has no replicaSpecs")
}

func keys(v any) []string { return slices.Sorted(maps.Keys(v.(map[string]any))) }
