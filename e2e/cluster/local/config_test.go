package local

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

func splitDocs(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split(string(b), "\n---\n") {
		d = strings.TrimPrefix(strings.TrimSpace(d), "---")
		if strings.TrimSpace(d) == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(d), &m), d)
		out = append(out, m)
	}
	return out
}

func TestRenderKwokConfig(t *testing.T) {
	cfg, err := renderKwokConfig(kwokctlOptions{KubeVersion: "v1.37.2", BinDir: "/bin/x",
		Ports: newComponentPortSet([]uint32{20001, 20002, 20003, 20004, 20005, 20006})},
		[]Stage{FailPodStage()},
		[]ClusterExec{{Name: "pg", Namespaces: []string{"ns"}, Pods: []string{"db-0"}, Containers: []string{"postgresql"},
			Env: map[string]string{"PGPORT": "5433", "PGHOST": "127.0.0.1"}, WorkDir: "/tmp"}})
	require.NoError(t, err)
	docs := splitDocs(t, cfg)
	require.Len(t, docs, 3)

	opts := docs[0]["options"].(map[string]any)
	assert.Equal(t, "KwokctlConfiguration", docs[0]["kind"])
	assert.Equal(t, "127.0.0.1", opts["bindAddress"], "everything must listen on loopback")
	assert.Equal(t, "binary", opts["runtime"])
	assert.Equal(t, "/bin/x/kube-apiserver", opts["kubeApiserverBinary"])
	assert.Equal(t, "/bin/x/kwok", opts["kwokControllerBinary"])
	assert.Equal(t, "/bin/x/etcd", opts["etcdBinary"])
	assert.Equal(t, "/bin/x/kubectl", opts["kubectlBinary"])
	assert.Equal(t, "v1.37.2", opts["kubeVersion"])
	for key, want := range map[string]float64{"etcdPort": 20001, "etcdPeerPort": 20002, "kubeApiserverPort": 20003,
		"kubeControllerManagerPort": 20004, "kubeSchedulerPort": 20005, "kwokControllerPort": 20006} {
		assert.Equal(t, want, opts[key], "reserved port for %s", key)
	}

	exec := docs[1]
	assert.Equal(t, "ClusterExec", exec["kind"])
	assert.Equal(t, "kwok.x-k8s.io/v1alpha1", exec["apiVersion"])
	spec := exec["spec"].(map[string]any)
	assert.Equal(t, map[string]any{"matchNamespaces": []any{"ns"}, "matchNames": []any{"db-0"}}, spec["selector"])
	target := spec["execs"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"postgresql"}, target["containers"])
	local := target["local"].(map[string]any)
	assert.Equal(t, "/tmp", local["workDir"])
	assert.Equal(t, []any{
		map[string]any{"name": "PGHOST", "value": "127.0.0.1"},
		map[string]any{"name": "PGPORT", "value": "5433"},
	}, local["envs"], "env sorted by name")

	assert.Equal(t, "Stage", docs[2]["kind"])
}

func TestRenderKwokConfigRejectsDuplicates(t *testing.T) {
	_, err := renderKwokConfig(kwokctlOptions{BinDir: "/b"}, []Stage{FailPodStage(), FailPodStage()}, nil)
	require.ErrorContains(t, err, "duplicate")
	_, err = renderKwokConfig(kwokctlOptions{BinDir: "/b"}, nil, []ClusterExec{{Name: "a"}, {Name: "a"}})
	require.ErrorContains(t, err, "duplicate")
	_, err = renderKwokConfig(kwokctlOptions{BinDir: "/b"}, nil, []ClusterExec{{}})
	require.ErrorContains(t, err, "name required")
}

func TestClusterExecWithoutSelectorMatchesAll(t *testing.T) {
	doc := clusterExecDoc(ClusterExec{Name: "all"})
	spec := doc["spec"].(map[string]any)
	assert.NotContains(t, spec, "selector")
	// kwok needs local set to run the command locally, even with no env.
	assert.Equal(t, map[string]any{}, spec["execs"].([]any)[0].(map[string]any)["local"])
}

func TestParseStage(t *testing.T) {
	s, err := ParseStage(FailPodStage().YAML)
	require.NoError(t, err)
	assert.Equal(t, "polyaxon-deploy-pod-fail", s.Name)

	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(s.YAML), &m))
	spec := m["spec"].(map[string]any)
	assert.EqualValues(t, 1000, spec["weight"], "must outweigh the default pod-ready stage")
	assert.Equal(t, map[string]any{FailAnnotation: "true"}, spec["selector"].(map[string]any)["matchAnnotations"])

	_, err = ParseStage("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
	require.Error(t, err)
	_, err = ParseStage(": not yaml")
	require.Error(t, err)
}

func TestKwokNode(t *testing.T) {
	pool := cluster.NodePool{Name: "experiments", Labels: map[string]string{"zone": "a"}, Taints: []corev1.Taint{cluster.GPUTaint}, Allocatable: cluster.NodeResources("4", "8Gi", "50", 2)}
	n := kwokNode("experiments-0", pool)
	assert.Equal(t, "fake", n.Annotations[KwokNodeAnnotation])
	assert.Equal(t, "experiments", n.Labels[cluster.PoolLabel])
	assert.Equal(t, "a", n.Labels["zone"])
	assert.Equal(t, "experiments-0", n.Labels["kubernetes.io/hostname"])
	assert.Equal(t, pool.Taints, n.Spec.Taints)
	gpu := n.Status.Allocatable[cluster.GPUResource]
	assert.Equal(t, int64(2), gpu.Value())
	assert.Equal(t, n.Status.Allocatable, n.Status.Capacity)
}
