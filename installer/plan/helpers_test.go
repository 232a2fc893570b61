package plan_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// node builds a Ready node: cpu in cores, memory in GiB, gpus of nvidia.com/gpu.
func node(name string, cpu, memGi, gpus int64, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	if gpus > 0 {
		alloc["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func gpuTaint() corev1.Taint {
	return corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
}

// spec builds a pod template with one container's requests ("cpu", "memory", "nvidia.com/gpu").
func spec(name string, req map[string]string) *corev1.Pod {
	rl := corev1.ResourceList{}
	for k, v := range req {
		rl[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "polyaxon", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
}

// replicas places n pods of one template.
func replicas(p *corev1.Pod, n int) []plan.PodToPlace {
	out := make([]plan.PodToPlace, n)
	for i := range out {
		out[i] = plan.PodToPlace{Name: p.Name + "-" + itoa(i), Source: plan.SourceRelease, Kind: "Deployment", Owner: p.Name, Index: i, Pod: p}
	}
	return out
}

// boundPod is an existing pod on a node.
func boundPod(name, nodeName string, req map[string]string) corev1.Pod {
	p := spec(name, req)
	p.Spec.NodeName = nodeName
	p.Status.Phase = corev1.PodRunning
	return *p
}

func itoa(i int) string { return resource.NewQuantity(int64(i), resource.DecimalSI).String() }

// seedsDir is the repository's copies of the docs' example configurations.
func seedsDir(t testing.TB) string {
	t.Helper()
	return filepath.Join("..", "..", "charts", "testdata", "seeds")
}

func byName(t testing.TB, r *plan.Result, name string) plan.PodResult {
	t.Helper()
	for _, p := range r.Pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pod %s in result", name)
	return plan.PodResult{}
}
