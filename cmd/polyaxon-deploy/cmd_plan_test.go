package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
)

func planTestNode(name string, cpu, memGi, gpus int64, pool string, taints ...corev1.Taint) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI), corev1.ResourcePods: resource.MustParse("110")}
	if gpus > 0 {
		alloc["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"polyaxon": pool}},
		Spec: corev1.NodeSpec{Taints: taints}, Status: corev1.NodeStatus{Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func runPlanCommand(t *testing.T, nodes []corev1.Node, args ...string) (int, string, string) {
	t.Helper()
	cs, _ := plantest.FakeAPI(nodes, nil)
	fakeServer(cs, "v1.37.2", true)
	settings := kube.NewSettings("", "", "polyaxon", kube.WithClientset(cs))
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	app.Metadata[envKey].(*env).newSettings = func(*cli.Context) *kube.Settings { return settings }
	err := app.RunContext(context.Background(), append([]string{"polyaxon-deploy", "plan"}, args...))
	return finish(app, err), out.String(), errb.String()
}

// The docs' distributed TensorFlow run on a cluster with 5 one-GPU nodes for its workers:
// six of the seven workers want a GPU (worker 2 does not), so one is short, and the plan
// says which and what is missing.
func TestPlanTopologySaysWhatIsMissing(t *testing.T) {
	var nodes []corev1.Node
	for i := 0; i < 2; i++ {
		nodes = append(nodes, planTestNode(fmt.Sprintf("core-%d", i), 8, 32, 0, "core"))
	}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	nodes = append(nodes, planTestNode("experiments-0", 16, 64, 1, "experiments", gpuTaint), planTestNode("builds-0", 8, 16, 0, "builds"))
	for i := 0; i < 5; i++ {
		nodes = append(nodes, planTestNode(fmt.Sprintf("gpu-%d", i), 8, 32, 1, "gpu-node"))
	}
	for i := 0; i < 2; i++ {
		nodes = append(nodes, planTestNode(fmt.Sprintf("cpu-%d", i), 4, 8, 0, "cpu-nodes"))
	}
	code, out, _ := runPlanCommand(t, nodes, "--topology", "../../charts/testdata/seeds/distributed-tf.yaml")
	assert.Equal(t, ExitCheckFailed, code, out)
	assert.Contains(t, out, "TOPOLOGY distributed-tf (11 replicas): does not fit")
	assert.Contains(t, out, "missing: worker 6: need 1 more node with 1 free nvidia.com/gpu matching polyaxon=gpu-node")
	assert.NotContains(t, out, "missing: ps", "parameter servers fit on the cpu-nodes pool")

	// With one more GPU node the whole run fits.
	nodes = append(nodes, planTestNode("gpu-5", 8, 32, 1, "gpu-node"))
	code, out, _ = runPlanCommand(t, nodes, "--topology", "../../charts/testdata/seeds/distributed-tf.yaml")
	assert.Equal(t, ExitOK, code, out)
	assert.Contains(t, out, "TOPOLOGY distributed-tf (11 replicas): fits")
}

func TestPlanJSONForRunCategories(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	nodes := []corev1.Node{planTestNode("core-0", 8, 32, 0, "core"), planTestNode("gpu-0", 16, 64, 2, "experiments", gpuTaint)}
	code, out, _ := runPlanCommand(t, nodes, "-o", "json", "--no-release")
	require.Equal(t, ExitCheckFailed, code, "builds has no node: %s", out)
	var res struct {
		Status string `json:"status"`
		Data   struct {
			Categories []struct {
				Category string `json:"category"`
				Result   struct {
					Verdict string `json:"verdict"`
				} `json:"result"`
			} `json:"categories"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	verdicts := map[string]string{}
	for _, c := range res.Data.Categories {
		verdicts[c.Category] = c.Result.Verdict
	}
	assert.Equal(t, map[string]string{"experiments": "fits", "jobs": "fits", "tensorboards": "fits", "notebooks": "fits", "builds": "unschedulable"}, verdicts)
}
