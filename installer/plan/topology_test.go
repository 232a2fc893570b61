package plan_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

func loadSeedTopology(t *testing.T) *plan.Topology {
	t.Helper()
	topo, err := plan.LoadTopology(filepath.Join(seedsDir(t), "distributed-tf.yaml"))
	require.NoError(t, err, "the seed must be accepted exactly as written")
	return topo
}

func TestSeedTopologyExpandsToElevenPods(t *testing.T) {
	topo := loadSeedTopology(t)
	assert.Equal(t, "tensorflow", topo.Framework)
	pods, err := topo.Pods("distributed-tf", "polyaxon", plan.CategoryScheduling{})
	require.NoError(t, err)
	require.Len(t, pods, 11)

	gpus := func(p plan.PodToPlace) string {
		q, ok := p.Pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		if !ok {
			return "none"
		}
		return q.String()
	}
	mem := func(p plan.PodToPlace) string { return p.Pod.Spec.Containers[0].Resources.Requests.Memory().String() }

	assert.Equal(t, "distributed-tf-master-0", pods[0].Name)
	assert.Equal(t, "1", gpus(pods[0]), "master 1 GPU")
	for i := 0; i < 7; i++ {
		w := pods[1+i]
		assert.Equal(t, "worker", w.Role)
		assert.Equal(t, i, w.Index)
		assert.Equal(t, map[string]string{"polyaxon": "gpu-node"}, w.Pod.Spec.NodeSelector, "worker %d keeps the default selector", i)
		if i == 2 {
			assert.Equal(t, "none", gpus(w), "worker 2 has no GPU")
		} else {
			assert.Equal(t, "1", gpus(w), "worker %d one GPU", i)
		}
	}
	for i := 0; i < 3; i++ {
		ps := pods[8+i]
		assert.Equal(t, "ps", ps.Role)
		assert.Equal(t, "none", gpus(ps), "ps %d cpu only", i)
		assert.Equal(t, map[string]string{"polyaxon": "cpu-nodes"}, ps.Pod.Spec.NodeSelector)
	}
	assert.Equal(t, "512Mi", mem(pods[8]), "ps 0 with 512 MiB")
	assert.Equal(t, "256Mi", mem(pods[9]))
	assert.Same(t, pods[1].Pod, pods[7].Pod, "identical workers share a template")
	assert.NotSame(t, pods[1].Pod, pods[3].Pod)
}

func gpuCluster(gpuNodes int) []corev1.Node {
	var nodes []corev1.Node
	for i := 0; i < gpuNodes; i++ {
		nodes = append(nodes, node("gpu-"+itoa(i), 8, 32, 1, map[string]string{"polyaxon": "gpu-node"}))
	}
	for i := 0; i < 2; i++ {
		nodes = append(nodes, node("cpu-"+itoa(i), 4, 16, 0, map[string]string{"polyaxon": "cpu-nodes"}))
	}
	return nodes
}

func TestSeedTopologyFitsAndReportsMissingGPUs(t *testing.T) {
	topo := loadSeedTopology(t)
	experiments := plan.CategoryScheduling{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "gpu-node"}}
	pods, err := topo.Pods("distributed-tf", "polyaxon", experiments)
	require.NoError(t, err)

	res := plan.Plan(plan.NewSnapshot(gpuCluster(7), nil), pods)
	require.Len(t, res.Topologies, 1)
	tr := res.Topologies[0]
	assert.Equal(t, plan.Fits, tr.Verdict, "7 GPUs for master + 6 GPU workers")
	assert.Equal(t, 11, tr.Replicas)
	assert.Empty(t, tr.Missing)
	assert.Equal(t, "tensorflow", tr.Framework)
	var roles []string
	for _, g := range tr.Groups {
		roles = append(roles, g.Role+" "+g.Indexes)
	}
	assert.Equal(t, []string{"master 0", "worker 0-6", "ps 0-2"}, roles, "consecutive replicas with one outcome form a group")

	// Five GPU nodes: the master and workers 0,1,3,4 take them, workers 5 and 6 cannot start.
	res = plan.Plan(plan.NewSnapshot(gpuCluster(5), nil), pods)
	tr = res.Topologies[0]
	assert.Equal(t, plan.Unschedulable, tr.Verdict)
	assert.Equal(t, []string{"worker 5-6: need 2 more nodes with 1 free nvidia.com/gpu matching polyaxon=gpu-node"}, tr.Missing)
	w5 := byName(t, res, "distributed-tf-worker-5")
	assert.Equal(t, plan.Unschedulable, w5.Verdict)
	assert.Equal(t, "0/7 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu.", w5.Message)
	assert.Equal(t, plan.DoesNotFit, res.Conclusion())

	// No node carries the workers' or the parameter servers' labels: say what to add, without
	// claiming a node count (that depends on the nodes' size).
	res = plan.Plan(plan.NewSnapshot([]corev1.Node{node("other", 8, 32, 4, map[string]string{"polyaxon": "experiments"})}, nil), pods)
	tr = res.Topologies[0]
	assert.Equal(t, []string{
		"master 0: no node passes its node selector, affinity and taints: need nodes matching polyaxon=gpu-node without NoSchedule taints, with room for 1 replica (0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.)",
		"worker 0-6: no node passes its node selector, affinity and taints: need nodes matching polyaxon=gpu-node without NoSchedule taints, with room for 7 replicas (0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.)",
		"ps 0-2: no node passes its node selector, affinity and taints: need nodes matching polyaxon=cpu-nodes without NoSchedule taints, with room for 3 replicas (0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.)",
	}, tr.Missing)

	res = plan.Plan(plan.NewSnapshot(gpuCluster(5), nil), pods)
	var buf bytes.Buffer
	require.NoError(t, plan.WriteTable(&buf, res))
	assert.Contains(t, buf.String(), "TOPOLOGY distributed-tf (11 replicas): does not fit")
	assert.Contains(t, buf.String(), "missing: worker 5-6: need 2 more nodes with 1 free nvidia.com/gpu matching polyaxon=gpu-node")
}

func TestTopologyValidation(t *testing.T) {
	// Each error names the field to fix; the edge of each rule is accepted.
	for _, c := range []struct{ name, doc, err string }{
		{"unknown field", "environment: {resources: {cpu: {request: 1}}}", `unknown field "request"`},
		{"index past the end", "environment: {replicas: {n_workers: 2, worker: [{index: 2}]}}", "environment.replicas.worker[0]: index 2 out of range 0..1"},
		{"negative index", "environment: {replicas: {n_ps: 2, ps: [{index: -1}]}}", "environment.replicas.ps[0]: index -1 out of range 0..1"},
		{"first and last index", "environment: {replicas: {n_workers: 2, worker: [{index: 0}, {index: 1}]}}", ""},
		{"duplicate index", "environment: {replicas: {n_ps: 2, ps: [{index: 1}, {index: 1}]}}", "environment.replicas.ps[1]: index 1 given twice"},
		{"negative workers", "environment: {replicas: {n_workers: -1}}", "environment.replicas: n_workers and n_ps must be >= 0"},
		{"negative ps", "environment: {replicas: {n_ps: -1}}", "environment.replicas: n_workers and n_ps must be >= 0"},
		{"no replicas", "environment: {replicas: {n_workers: 0, n_ps: 0}}", ""},
		{"negative amount", "environment: {resources: {cpu: {requests: -1}}}", "amount -1: must be >= 0"},
		{"zero amount", "environment: {resources: {cpu: {requests: 0}}}", ""},
		{"bad quantity", `environment: {resources: {memory: {requests: "1Gx"}}}`, `amount "1Gx"`},
		{"fractional gpu", "environment: {resources: {gpu: {requests: 0.5}}}", "gpu: 0.5 is not a whole number of devices"},
		{"fractional gpu limit", "environment: {resources: {gpu: {limits: 1.5}}}", "gpu: 1.5 is not a whole number"},
		{"gpu requests below limits", "environment: {resources: {gpu: {requests: 1, limits: 2}}}", "nvidia.com/gpu: requests 1 must equal limits 2 (extended resource)"},
		{"custom gpu resource", "environment: {gpu_resource: amd.com/gpu, resources: {gpu: {requests: 2, limits: 1}}}", "amd.com/gpu: requests 2 exceed limits 1"},
		{"requests > limits", "environment: {resources: {cpu: {requests: 2, limits: 1}}}", "cpu: requests 2 exceed limits 1"},
		{"requests = limits", "environment: {resources: {cpu: {requests: 1, limits: 1}, gpu: {requests: 1, limits: 1}}}", ""},
		{"bad placement", "environment: {placement: {mode: per-rack}}", `environment.placement: placement mode "per-rack": want requests, per-gpu or per-machine`},
		{"per-machine w/o n", "environment: {placement: {mode: per-machine}}", "environment.placement: placement per-machine needs processesPerMachine >= 1"},
		{"per-machine with 1", "environment: {placement: {mode: per-machine, processesPerMachine: 1}}", ""},
		{"per-gpu with n", "environment: {placement: {mode: per-gpu, processesPerMachine: 2}}", "placement per-gpu takes no processesPerMachine"},
		{"requests placement", "environment: {placement: {mode: requests}}", ""},
		{"default worker placement", "environment: {replicas: {n_workers: 1, default_worker: {placement: {mode: x}}}}", "environment.replicas.default_worker.placement: "},
		{"default ps placement", "environment: {replicas: {n_ps: 1, default_ps: {placement: {mode: per-machine}}}}", "environment.replicas.default_ps.placement: "},
		{"override placement", "environment: {replicas: {n_workers: 1, worker: [{index: 0, placement: {mode: x}}]}}", "environment.replicas.worker[0].placement: "},
		{"worker resources", "environment: {replicas: {n_workers: 2, worker: [{index: 1, resources: {cpu: {requests: 2, limits: 1}}}]}}", "worker 1: cpu: requests 2 exceed limits 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo, err := plan.ParseTopology([]byte(c.doc))
			if err == nil {
				_, err = topo.Pods("t", "ns", plan.CategoryScheduling{})
			}
			if c.err == "" {
				assert.NoError(t, err)
			} else if assert.Error(t, err) {
				assert.Contains(t, err.Error(), c.err)
			}
		})
	}
	topo, err := plan.ParseTopology([]byte(`environment: {resources: {memory: {requests: "1Gi"}, cpu: {limits: 0.5}}}`))
	require.NoError(t, err)
	pods, err := topo.Pods("t", "ns", plan.CategoryScheduling{})
	require.NoError(t, err)
	r := pods[0].Pod.Spec.Containers[0].Resources
	assert.Equal(t, "1Gi", r.Requests.Memory().String(), "quantity strings are taken as written")
	assert.Equal(t, "500m", r.Requests.Cpu().String(), "requests default to limits")
}

func TestTopologySchedulingFallsBackPerField(t *testing.T) {
	topo, err := plan.ParseTopology([]byte(`
environment:
  replicas:
    n_workers: 2
    default_worker:
      tolerations: [{key: gpu, operator: Exists}]
    worker:
    - index: 1
      node_selector: {pool: b}
`))
	require.NoError(t, err)
	defs := plan.CategoryScheduling{NodeSelector: map[string]string{"pool": "exp"}, Tolerations: []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpExists}}}
	pods, err := topo.Pods("t", "ns", defs)
	require.NoError(t, err)
	require.Len(t, pods, 3)
	assert.Equal(t, map[string]string{"pool": "exp"}, pods[0].Pod.Spec.NodeSelector, "master: category defaults")
	assert.Equal(t, "x", pods[0].Pod.Spec.Tolerations[0].Key)
	assert.Equal(t, map[string]string{"pool": "exp"}, pods[1].Pod.Spec.NodeSelector, "worker 0: default selector from the category")
	assert.Equal(t, "gpu", pods[1].Pod.Spec.Tolerations[0].Key, "worker 0: tolerations from default_worker")
	assert.Equal(t, map[string]string{"pool": "b"}, pods[2].Pod.Spec.NodeSelector, "worker 1: its own selector")
	assert.Equal(t, "gpu", pods[2].Pod.Spec.Tolerations[0].Key, "worker 1: tolerations from default_worker")
}

func TestGPUFractionPlacement(t *testing.T) {
	nodes := []corev1.Node{
		node("g4", 16, 64, 4, map[string]string{"polyaxon": "gpu"}),
		node("g2", 8, 32, 2, map[string]string{"polyaxon": "gpu"}),
	}
	// A DaemonSet-like pod already takes 2 cores on g4: per-gpu shares out what is free.
	existing := []corev1.Pod{boundPod("ds", "g4", map[string]string{"cpu": "2"})}
	snap := plan.NewSnapshot(nodes, existing)

	topo, err := plan.ParseTopology([]byte(`
framework: horovod
environment:
  placement: {mode: per-gpu}
  replicas: {n_workers: 6}
`))
	require.NoError(t, err)
	pods, err := topo.Pods("hvd", "ns", plan.CategoryScheduling{})
	require.NoError(t, err)
	res := plan.Plan(snap, pods)
	master := byName(t, res, "hvd-master-0")
	assert.Equal(t, plan.Fits, master.Verdict)
	assert.Equal(t, "per-gpu", master.Placement)
	assert.Equal(t, "g4", master.AssumedNode)
	assert.Equal(t, map[string]string{"cpu": "3500m", "memory": "16Gi", "nvidia.com/gpu": "1"}, master.Requests, "1/4 of g4's free cpu and memory")
	for i := 0; i < 5; i++ {
		assert.Equal(t, plan.Fits, byName(t, res, "hvd-worker-"+itoa(i)).Verdict, "worker %d", i)
	}
	w5 := byName(t, res, "hvd-worker-5")
	assert.Equal(t, plan.Unschedulable, w5.Verdict, "7 processes, 6 GPUs")
	tr := res.Topologies[0]
	assert.Equal(t, []string{"worker 5: need 1 more free nvidia.com/gpu (per-gpu placement, with its share of cpu and memory)"}, tr.Missing)

	topo, err = plan.ParseTopology([]byte(`
environment:
  replicas:
    n_workers: 3
    default_worker: {placement: {mode: per-machine, processesPerMachine: 2}}
`))
	require.NoError(t, err)
	pods, err = topo.Pods("pm", "ns", plan.CategoryScheduling{})
	require.NoError(t, err)
	res = plan.Plan(snap, pods[1:]) // workers only
	for i := 0; i < 3; i++ {
		assert.Equal(t, plan.Fits, res.Pods[i].Verdict)
	}
	w := res.Pods[0]
	assert.Equal(t, "per-machine 1/2", w.Placement)
	assert.Equal(t, "g2", w.AssumedNode, "LeastAllocated after the claim: g2 keeps half, g4 less")
	assert.Equal(t, map[string]string{"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}, w.Requests, "half of g2")
	assert.Equal(t, "g4", res.Pods[1].AssumedNode)
	assert.Equal(t, map[string]string{"cpu": "7", "memory": "32Gi", "nvidia.com/gpu": "2"}, res.Pods[1].Requests, "half of g4's free resources")
}

// The example under values/topologies, on the demo cluster's shape (2 tainted experiments
// nodes with 4 GPUs each, as README shows): 8 replicas fit, workers 7-8 are 2 GPUs short.
func TestExampleTopologyOnDemoCluster(t *testing.T) {
	topo, err := plan.LoadTopology(filepath.Join("..", "..", "values", "topologies", "distributed-10-gpus.yaml"))
	require.NoError(t, err)
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	experiments := plan.CategoryScheduling{Category: "experiments",
		NodeSelector: map[string]string{"polyaxon": "experiments"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	pods, err := topo.Pods("distributed-10-gpus", "polyaxon", experiments)
	require.NoError(t, err)
	require.Len(t, pods, 10)

	cluster := []corev1.Node{
		node("core-0", 8, 32, 0, map[string]string{"polyaxon": "core"}),
		node("core-1", 8, 32, 0, map[string]string{"polyaxon": "core"}),
		node("experiments-0", 16, 64, 4, map[string]string{"polyaxon": "experiments"}, gpuTaint),
		node("experiments-1", 16, 64, 4, map[string]string{"polyaxon": "experiments"}, gpuTaint),
		node("builds-0", 8, 16, 0, map[string]string{"polyaxon": "builds"}),
	}
	tr := plan.Plan(plan.NewSnapshot(cluster, nil), pods).Topologies[0]
	assert.Equal(t, plan.Unschedulable, tr.Verdict)
	assert.Equal(t, []string{"worker 7-8: need 2 more nodes with 1 free nvidia.com/gpu matching polyaxon=experiments"}, tr.Missing)

	// One more GPU node and the whole run fits.
	cluster = append(cluster, node("experiments-2", 16, 64, 4, map[string]string{"polyaxon": "experiments"}, gpuTaint))
	tr = plan.Plan(plan.NewSnapshot(cluster, nil), pods).Topologies[0]
	assert.Equal(t, plan.Fits, tr.Verdict)
	assert.Empty(t, tr.Missing)
}
