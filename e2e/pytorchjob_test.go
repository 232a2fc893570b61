package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

var pytorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// Each replica of the distributed runs below: the "pytorch" container's requests plus the
// Polyaxon sidecar's (50m, 64Mi), one GPU. The GPUs decide: 4 per experiments node, 8 in all.
const (
	replicaCPU    = "1"
	replicaMemory = "2Gi"
)

// TestPyTorchJobThroughTheTrainingOperator: the real Kubeflow training operator
// (v1.8.1, built from the Go module proxy) on the local control plane. Before its CRDs exist,
// `check` refuses operators.pytorchjob=true (distributed-backends) with the fix; with them the
// production install passes. A PyTorchJob shaped as Polyaxon's operator creates it, in the runs'
// namespace (polyaxon-runs), which the training operator watches (master and
// workers, each with Polyaxon's run labels, init and sidecar containers and one nvidia.com/gpu)
// is turned into pods by the training operator; the API server places and hardens them by the
// chart's policies (the operator's own init container included) and the scheduler binds them to
// the experiments pool. `plan --topology` for the same topology said so beforehand: all fit on
// polyaxon=experiments for 1+3 replicas; for 1+8 replicas, 8 fit and 1 does not, as happens.
func TestPyTorchJobThroughTheTrainingOperator(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	op := trainingOperator.get(t)
	c := runsCluster(t, "kubeflow")
	ns, runs := nsInstall, nsRuns
	pytorch := []string{"--set", "operators.pytorchjob=true"}

	t.Run("check refuses the backend until its CRDs are served", func(t *testing.T) {
		r := c.deploy(t, append([]string{"check", "--pre", "--profile", "production", "-o", "json"}, pytorch...)...).requireExit(t, 3)
		res := r.result(t)
		assert.Equal(t, []string{"distributed-backends"}, failedChecks(res))
		assert.Contains(t, checkDetail(res, "distributed-backends"), "operators.pytorchjob is true but the cluster does not serve PyTorchJob (kubeflow.org/v1): install the Kubeflow training operator v1.8")
		applyKubeflowCRDs(t, c, op.CRDs, "pytorchjobs")
		c.deploy(t, append([]string{"check", "--pre", "--profile", "production", "-o", "json"}, pytorch...)...).requireExit(t, 0)
	})

	c.deploy(t, append([]string{"install", "--profile", "production", "-o", "json"}, pytorch...)...).requireExit(t, 0)
	startTrainingOperator(t, c, op.Bin, runs)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	ev, _ := offlineEvaluator(t, ns, "operators.pytorchjob=true")
	pools := nodePools(t, c.Clientset)

	for _, tc := range []struct {
		name    string
		workers int
		fits    int // replicas the plan places
	}{
		{name: "ddp-4", workers: 3, fits: 4},
		{name: "ddp-9", workers: 8, fits: 8},
	} {
		t.Run(fmt.Sprintf("1 master and %d workers", tc.workers), func(t *testing.T) {
			replicas := 1 + tc.workers
			top := planTopology(t, c, tc.name, tc.workers)
			assert.Equal(t, replicas, top.Replicas)
			placed, unschedulable := 0, 0
			for _, g := range top.Groups {
				if g.Verdict == plan.Fits {
					placed += g.Count
					for _, p := range g.Pools {
						assert.Equal(t, cluster.PoolLabel+"="+cluster.PoolExperiments, p.Pool, "plan places %s %s on the experiments pool", g.Role, g.Indexes)
					}
				} else {
					unschedulable += g.Count
				}
			}
			require.Equal(t, tc.fits, placed, "the plan: %+v", top)
			if tc.fits == replicas {
				assert.Equal(t, plan.Fits, top.Verdict)
			} else {
				assert.Equal(t, plan.Unschedulable, top.Verdict)
				assert.NotEmpty(t, top.Missing)
			}

			name := "plx-operation-" + tc.name
			job := polyaxonPyTorchJob(t, runs, name, tc.workers)
			_, err := dyn.Resource(pytorchJobs).Namespace(runs).Create(ctxT(t, time.Minute), job, metav1.CreateOptions{})
			require.NoError(t, err)
			pods := waitJobPodsSettled(t, c.Clientset, runs, name, replicas)
			bound := 0
			for _, p := range pods {
				what := "pod " + p.Name
				assert.Equal(t, "polyaxon-pytorch-jobs", p.Labels["app.kubernetes.io/component"], what)
				assert.Equal(t, map[string]string{cluster.PoolLabel: cluster.PoolExperiments}, p.Spec.NodeSelector, what)
				assert.Contains(t, p.Spec.Tolerations, gpuToleration, what)
				requireHardened(t, what, &p)
				// The operator's pod before admission is the stored one without what the policies
				// and the API server wrote: the template set no scheduling and no securityContext.
				predicted, err := ev.MutatePod(context.Background(), asSent(&p))
				require.NoError(t, err)
				requireStoredAsPredicted(t, what, &p, predicted)
				if p.Spec.NodeName != "" {
					bound++
					assert.Equal(t, cluster.PoolExperiments, pools[p.Spec.NodeName], "%s runs on %s", what, p.Spec.NodeName)
				}
			}
			assert.Equal(t, tc.fits, bound, "the scheduler bound as many replicas as the plan placed")
			assert.Equal(t, unschedulable, replicas-bound)
			evs, err := c.Clientset.CoreV1().Events(runs).List(ctxT(t, time.Minute), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			require.NoError(t, err)
			for _, e := range evs.Items {
				assert.NotEqual(t, "FailedCreatePod", e.Reason, "the training operator's pods were admitted: %s", e.Message)
			}

			require.NoError(t, dyn.Resource(pytorchJobs).Namespace(runs).Delete(ctxT(t, time.Minute), name,
				metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)}))
			waitFor(t, 2*time.Minute, "the pods of "+name+" gone", func(ctx context.Context) (bool, string, error) {
				list, err := c.Clientset.CoreV1().Pods(runs).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=" + name})
				if err != nil {
					return false, err.Error(), nil
				}
				return len(list.Items) == 0, fmt.Sprintf("%d pods left", len(list.Items)), nil
			})
		})
	}
}

// planTopology asks `plan --topology` about a distributed run with the replicas' resources.
func planTopology(t *testing.T, c *testCluster, name string, workers int) plan.TopologyResult {
	t.Helper()
	mem := resource.MustParse(replicaMemory)
	res := fmt.Sprintf("{cpu: {requests: %s}, memory: {requests: %d}, gpu: {requests: 1, limits: 1}}",
		addQuantities(replicaCPU, "50m"), (mem.Value()>>20)+64)
	doc := fmt.Sprintf("framework: pytorch\nenvironment:\n  resources: %s\n  replicas:\n    n_workers: %d\n    default_worker:\n      resources: %s\n", res, workers, res)
	path := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	r := c.deploy(t, "plan", "--profile", "production", "--set", "operators.pytorchjob=true", "--no-release", "--topology", path, "-o", "json")
	var pr plan.Result
	r.data(t, &pr)
	require.Len(t, pr.Topologies, 1, r.String())
	return pr.Topologies[0]
}

func addQuantities(a, b string) string {
	q := resource.MustParse(a)
	q.Add(resource.MustParse(b))
	return fmt.Sprint(q.AsApproximateFloat64())
}

// polyaxonPyTorchJob is a PyTorchJob as Polyaxon's operator (mloperator) creates it: the
// operation's labels on the job and merged into every replica template; each template is the
// run pod Polyaxon's agent builds (e2e/testdata/runpods/experiment.yaml: init containers,
// "pytorch" and the sidecar, the artifacts claim) with the replica's resources.
func polyaxonPyTorchJob(t *testing.T, ns, name string, workers int) *unstructured.Unstructured {
	t.Helper()
	pod := loadRunPod(t, "experiment.yaml", ns)
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "pytorch" {
			pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(replicaCPU), corev1.ResourceMemory: resource.MustParse(replicaMemory)},
				Limits:   corev1.ResourceList{cluster.GPUResource: resource.MustParse("1")},
			}
		}
	}
	pod.Spec.RestartPolicy = ""
	template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: pod.Spec})
	require.NoError(t, err)
	replica := func(n int) map[string]any {
		return map[string]any{"replicas": int64(n), "restartPolicy": "OnFailure", "template": template}
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"runPolicy":           map[string]any{"cleanPodPolicy": "All", "backoffLimit": int64(0)},
			"pytorchReplicaSpecs": map[string]any{"Master": replica(1), "Worker": replica(workers)},
		},
	}}
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	job.SetLabels(labels)
	return job
}

// waitJobPodsSettled waits until the training operator made n pods for the job and the
// scheduler decided about each (bound or Unschedulable).
func waitJobPodsSettled(t *testing.T, cs kubernetes.Interface, ns, job string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d pods of %s scheduled or Unschedulable", n, job), func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=" + job})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = list.Items
		if len(pods) != n {
			return false, fmt.Sprintf("%d of %d pods", len(pods), n), nil
		}
		for i := range pods {
			if pods[i].Spec.NodeName == "" && !unschedulable(&pods[i]) {
				return false, pods[i].Name + " pending", nil
			}
		}
		return true, "", nil
	})
	return pods
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// asSent is a stored pod as its creator sent it, for a creator that set no scheduling and no
// securityContext (the policies' inputs): what the server added and what the policies wrote
// are taken out.
func asSent(p *corev1.Pod) *corev1.Pod {
	s := withoutServerAdditions(p)
	s.Spec.NodeSelector, s.Spec.Tolerations, s.Spec.Affinity, s.Spec.SecurityContext = nil, nil, nil, nil
	for _, list := range [][]corev1.Container{s.Spec.InitContainers, s.Spec.Containers} {
		for i := range list {
			list[i].SecurityContext = nil
		}
	}
	s.ResourceVersion, s.UID, s.Status = "", "", corev1.PodStatus{}
	return s
}
