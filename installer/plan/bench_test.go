package plan_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
)

// benchCluster: n nodes in three pools (20% core, 60% GPU experiments tainted
// nvidia.com/gpu, 20% builds) with 10 bound pods per node using about half of each node.
// Objects are generated per page (plantest.FakeAPIFunc), like a server decoding them.
func benchCluster(n int) (func(int) corev1.Node, func(int) corev1.Pod) {
	small := []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	gpu := []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("1")}}}}
	nodeName := func(i int) string { return fmt.Sprintf("node-%06d", i) }
	mkNode := func(i int) corev1.Node {
		name := nodeName(i)
		switch {
		case i%5 == 0:
			return node(name, 16, 64, 0, map[string]string{"polyaxon": "core", "kubernetes.io/hostname": name})
		case i%5 == 4:
			return node(name, 16, 64, 0, map[string]string{"polyaxon": "builds", "kubernetes.io/hostname": name})
		}
		return node(name, 32, 128, 8, map[string]string{"polyaxon": "experiments", "kubernetes.io/hostname": name}, gpuTaint())
	}
	mkPod := func(k int) corev1.Pod {
		i, j := k/10, k%10
		c := small
		if i%5 != 0 && i%5 != 4 && j < 4 {
			c = gpu
		}
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-p%d", nodeName(i), j), Namespace: "work"},
			Spec:       corev1.PodSpec{NodeName: nodeName(i), Containers: c},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	return mkNode, mkPod
}

// productionRelease synthesizes the production profile's pod-bearing objects (15 pods): core
// on polyaxon=core, dependencies with persistence, the migrations Job.
func productionRelease() []k8sruntime.Object {
	core := map[string]string{"polyaxon": "core"}
	tmpl := func(component, cpu, mem string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon", "app.kubernetes.io/component": component}},
			Spec: corev1.PodSpec{NodeSelector: core, Containers: []corev1.Container{{Name: component, Image: "polyaxon/" + component,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		}
	}
	deploy := func(name string, replicas int32, cpu, mem string) k8sruntime.Object {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-" + name, Namespace: "polyaxon"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: tmpl(name, cpu, mem)}}
	}
	sts := func(name, cpu, mem string) k8sruntime.Object {
		t := tmpl(name, cpu, mem)
		t.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-polyaxon-" + name + "-0"}}}}
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-" + name, Namespace: "polyaxon"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Template: t}}
	}
	return []k8sruntime.Object{
		deploy("gateway", 2, "500m", "1Gi"),
		deploy("scheduler", 1, "250m", "512Mi"),
		deploy("worker", 3, "500m", "1Gi"),
		deploy("beat", 1, "100m", "256Mi"),
		deploy("agent", 1, "250m", "512Mi"),
		deploy("operator", 1, "250m", "256Mi"),
		deploy("streams", 2, "250m", "512Mi"),
		sts("postgresql", "1", "2Gi"),
		sts("rabbitmq", "500m", "1Gi"),
		sts("redis", "250m", "512Mi"),
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-migrate-2-15-1", Namespace: "polyaxon"},
			Spec: batchv1.JobSpec{Template: tmpl("migrations", "250m", "512Mi")}},
	}
}

var benchDefaults = plan.RunPlacement{Enforced: true, Categories: []plan.CategoryScheduling{
	{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "experiments"}, Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	{Category: "jobs", NodeSelector: map[string]string{"polyaxon": "experiments"}, Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	{Category: "builds", NodeSelector: map[string]string{"polyaxon": "builds"}},
	{Category: "tensorboards", NodeSelector: map[string]string{"polyaxon": "core"}},
	{Category: "notebooks", NodeSelector: map[string]string{"polyaxon": "experiments"}, Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
}}

const benchTopology = `
framework: tensorflow
environment:
  resources: {cpu: {requests: 4}, memory: {requests: 8192}, gpu: {requests: 1}}
  replicas:
    n_workers: 64
    n_ps: 8
    default_worker:
      resources: {cpu: {requests: 4}, memory: {requests: 16384}, gpu: {requests: 1}}
    default_ps:
      node_selector: {polyaxon: builds}
      tolerations: []
      resources: {cpu: {requests: 2}, memory: {requests: 4096}}
`

// BenchmarkPlan measures `plan` end to end against a fake API that paginates like a real
// server: LIST nodes and pods (10 per node), then plan the production release (15 pods), the
// five category probes and a 1-master/64-worker/8-ps topology. Custom metrics: api-calls/op
// (LIST requests, pages included), snapshot-ms/op and plan-ms/op (the two halves of ns/op),
// peak-RSS-MB (VmHWM during the timed loop) and base-RSS-MB (RSS before it: the test binary,
// the fake clientset and earlier sub-benchmarks' freed-but-retained memory).
func BenchmarkPlan(b *testing.B) {
	topo, err := plan.ParseTopology([]byte(benchTopology))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{500, 5000, 50000} {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			mkNode, mkPod := benchCluster(n)
			cs, calls := plantest.FakeAPIFunc(n, mkNode, 10*n, mkPod)
			objs := productionRelease()
			runtime.GC()
			baseRSS := resetPeakRSS()
			calls.Reset()
			var snapDur, planDur time.Duration
			var last *plan.Result
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				snap, err := plan.LoadSnapshot(context.Background(), cs)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				release, err := plan.PodsFromObjects(objs)
				if err != nil {
					b.Fatal(err)
				}
				tp, err := topo.Pods("tf", "polyaxon", benchDefaults.Categories[0])
				if err != nil {
					b.Fatal(err)
				}
				all := append(release, plan.CategoryProbes(benchDefaults, "polyaxon")...)
				last = plan.Plan(snap, append(all, tp...))
				snapDur += t1.Sub(t0)
				planDur += time.Since(t1)
			}
			b.StopTimer()
			b.ReportMetric(float64(calls.Total())/float64(b.N), "api-calls/op")
			b.ReportMetric(float64(snapDur.Milliseconds())/float64(b.N), "snapshot-ms/op")
			b.ReportMetric(float64(planDur.Milliseconds())/float64(b.N), "plan-ms/op")
			if peak := peakRSS(); peak > 0 {
				b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
				b.ReportMetric(float64(baseRSS)/1024, "base-RSS-MB")
			}
			if !last.Summary.OK || last.Topologies[0].Verdict != plan.Fits {
				b.Fatalf("benchmark scenario should fit: %+v", last.Summary)
			}
		})
	}
}

// resetPeakRSS resets VmHWM (Linux: write 5 to clear_refs) and returns the current RSS in KiB.
func resetPeakRSS() int64 {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return procStatus("VmRSS:")
}

// peakRSS is VmHWM in KiB since the last reset (0 where /proc is missing).
func peakRSS() int64 { return procStatus("VmHWM:") }

func procStatus(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), key) {
			fs := strings.Fields(sc.Text())
			v, _ := strconv.ParseInt(fs[1], 10, 64)
			return v
		}
	}
	return 0
}
