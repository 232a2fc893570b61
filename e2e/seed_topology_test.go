package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/trainingoperator"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// TestSeed001DistributedRunsThroughTheCLI: seed 001's topology (../shared/fixtures/seeds/
// distributed-tf.yaml) as the Polyaxon 2.x polyaxonfile users get
// (values/polyaxonfiles/distributed-tf.yaml), and the PyTorch example beside it, run as the demo
// runs them: Polyaxon's own CLI, API, agent and the operator stand-in, the real Kubeflow
// training operator (tfjob and pytorchjob), a production install with operators.tfjob and
// operators.pytorchjob. Each run becomes a KfJob, then a Kubeflow job, whose pods (11: 1 chief,
// 7 workers, 3 ps; 4: 1 master, 3 workers) the real scheduler binds to the GPU pool
// (experiments), the GPU replicas with one nvidia.com/gpu each; kwok completes them as a
// node would when the training ends (trainingoperator.KubeflowPodsCompleteStage), and the run's status
// in Polyaxon's API reaches succeeded.
func TestSeed001DistributedRunsThroughTheCLI(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns, runsNS := nsInstall, nsRuns
	op := trainingOperator.get(t)
	c := polyaxonCluster(t, "seeds", ns, local.WithStages(trainingoperator.KubeflowPodsCompleteStage()))
	venv, _ := polyaxonPrograms(t)
	applyKubeflowCRDs(t, c, op.CRDs, "tfjobs", "pytorchjobs")
	createNamespace(t, c, ns)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "operators.tfjob=true", "--set", "operators.pytorchjob=true",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path="+t.TempDir(),
	).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	startTrainingOperator(t, c, op.Bin, runsNS, "tfjob", "pytorchjob")

	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	ctx := ctxT(t, 15*time.Minute)
	_, err = cli.run(ctx, "project", "create", "--name", "demo")
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)

	for _, tc := range []struct {
		file    string
		kind    schema.GroupVersionResource // the Kubeflow job the KfJob becomes
		roles   map[string]int              // replica type -> pods
		gpuless []string                    // replica types without a GPU
	}{
		{file: "distributed-tf.yaml", kind: tfJobs, roles: map[string]int{"chief": 1, "worker": 7, "ps": 3}, gpuless: []string{"ps"}},
		{file: "distributed-pytorch.yaml", kind: pytorchJobs, roles: map[string]int{"master": 1, "worker": 3}},
	} {
		name := strings.TrimSuffix(tc.file, ".yaml")
		t.Run(name, func(t *testing.T) {
			want := 0
			for _, n := range tc.roles {
				want += n
			}
			uuid := cli.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", tc.file), "demo")
			seen := watchRunPods(t, c, runsNS, uuid)
			cli.waitStatus(t, ctx, "demo", uuid, "succeeded")

			kfjobs, err := dyn.Resource(kfjobsGVR).Namespace(runsNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
			require.NoError(t, err)
			assert.Lenf(t, kfjobs.Items, 1, "the agent made run %s a KfJob", uuid)
			jobs, err := dyn.Resource(tc.kind).Namespace(runsNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
			require.NoError(t, err)
			assert.Lenf(t, jobs.Items, 1, "the operator made the KfJob a %s", tc.kind.Resource)

			pods := seen()
			pools := nodePools(t, c.Clientset)
			roles := map[string]int{}
			var table []string
			for _, p := range pods {
				role := strings.ToLower(p.Labels["training.kubeflow.org/replica-type"])
				roles[role]++
				gpus := podGPUs(&p)
				table = append(table, fmt.Sprintf("%-44s %-7s %-14s %-12s gpu=%d %s", p.Name, role, p.Spec.NodeName, pools[p.Spec.NodeName], gpus, p.Status.Phase))
				what := "pod " + p.Name
				assert.Equalf(t, cluster.PoolExperiments, pools[p.Spec.NodeName], "%s runs on the GPU pool (experiments), not %q (node %q)", what, pools[p.Spec.NodeName], p.Spec.NodeName)
				if slices.Contains(tc.gpuless, role) {
					assert.Zerof(t, gpus, "%s (%s) asks for no GPU", what, role)
				} else {
					assert.EqualValuesf(t, 1, gpus, "%s (%s) has one GPU, as the seed gives it", what, role)
				}
			}
			sort.Strings(table)
			t.Logf("the pods of run %s (%s) and their nodes:\n%s", uuid, name, strings.Join(table, "\n"))
			assert.Equal(t, tc.roles, roles, "replicas by type")
			assert.Lenf(t, pods, want, "%d pods", want)
		})
	}
}

var tfJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "tfjobs"}

// podGPUs is the nvidia.com/gpu a pod's containers ask for (limits; requests when no limit).
func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[cluster.GPUResource]; ok {
			n += q.Value()
		} else if q, ok := c.Resources.Requests[cluster.GPUResource]; ok {
			n += q.Value()
		}
	}
	return n
}

// watchRunPods watches the pods of run uuid in ns from now until the test ends and returns a
// function giving each pod seen, as last seen bound to a node: a run's pods may be cleaned up
// as soon as it succeeds.
func watchRunPods(t *testing.T, c *testCluster, ns, uuid string) func() []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		pods = map[string]corev1.Pod{}
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Error {
					continue
				}
				mu.Lock()
				if p.Spec.NodeName != "" || pods[p.Name].Spec.NodeName == "" {
					pods[p.Name] = *p
				}
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []corev1.Pod {
		// What the API server still has, as the watch may lag behind.
		if list, err := c.Clientset.CoreV1().Pods(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid}); err == nil {
			mu.Lock()
			for _, p := range list.Items {
				if p.Spec.NodeName != "" || pods[p.Name].Spec.NodeName == "" {
					pods[p.Name] = p
				}
			}
			mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		out := make([]corev1.Pod, 0, len(pods))
		for _, p := range pods {
			out = append(out, p)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
}
