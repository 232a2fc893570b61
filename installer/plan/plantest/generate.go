package plantest

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CaseLabel marks a case's nodes and pods; every pod of a case selects its case's nodes
// through it, so many cases can share one cluster without seeing each other.
const CaseLabel = "plantest.polyaxon-deploy.io/case"

// Case is one randomized scheduling scenario: nodes, pods already bound to them, and pods to
// schedule one after the other, in order.
type Case struct {
	ID       string
	Seed     int64
	Nodes    []corev1.Node
	Existing []corev1.Pod
	Pods     []corev1.Pod
}

// Generate builds the case for seed, deterministically. Nodes vary in labels (pool, zone,
// disk), taints (NoSchedule, NoExecute, PreferNoSchedule), cordoning, allocatable cpu, memory,
// ephemeral storage, pod slots and nvidia.com/gpu; existing pods take part of them (some with
// a host port); the pods to place vary in requests (incl. init containers, zero requests,
// GPUs), node selectors, required node affinity (In/NotIn/Exists), tolerations (Equal,
// Exists, wildcard, the unschedulable toleration) and host ports, and some repeat a template
// the way replicas do.
func Generate(seed int64, namespace string) Case {
	r := rand.New(rand.NewSource(seed))
	id := fmt.Sprintf("c%d", seed)
	c := Case{ID: id, Seed: seed}
	pools := []string{"cpu", "gpu", "mem"}
	zones := []string{"a", "b"}

	nNodes := 2 + r.Intn(5)
	for i := 0; i < nNodes; i++ {
		pool := pools[r.Intn(len(pools))]
		labels := map[string]string{CaseLabel: id, "pool": pool, "zone": zones[r.Intn(2)]}
		if r.Intn(3) == 0 {
			labels["disk"] = "ssd"
		}
		cpu := []int64{1000, 2000, 2500, 4000, 8000}[r.Intn(5)]
		memGi := []int64{2, 4, 8, 16}[r.Intn(4)]
		alloc := corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(int64(3+r.Intn(8)), resource.DecimalSI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(10+r.Intn(40))<<30, resource.BinarySI),
		}
		if pool == "gpu" || r.Intn(6) == 0 {
			if g := []int64{0, 1, 2, 4}[r.Intn(4)]; g > 0 {
				alloc["nvidia.com/gpu"] = *resource.NewQuantity(g, resource.DecimalSI)
			}
		}
		var taints []corev1.Taint
		if pool == "gpu" && r.Intn(2) == 0 {
			taints = append(taints, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
		}
		if r.Intn(5) == 0 {
			taints = append(taints, corev1.Taint{Key: "dedicated", Value: pool, Effect: corev1.TaintEffectNoSchedule})
		}
		if r.Intn(8) == 0 {
			taints = append(taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
		}
		if r.Intn(5) == 0 {
			taints = append(taints, corev1.Taint{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
		}
		name := fmt.Sprintf("%s-n%d", id, i)
		c.Nodes = append(c.Nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec: corev1.NodeSpec{Taints: taints, Unschedulable: r.Intn(10) == 0},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc.DeepCopy(),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		// Existing pods: bound by name, taking up to about half of the node.
		for j := 0; j < r.Intn(3); j++ {
			req := corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu*int64(1+r.Intn(3))/8, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity((memGi<<30)*int64(1+r.Intn(3))/8, resource.BinarySI),
			}
			if g, ok := alloc["nvidia.com/gpu"]; ok && r.Intn(2) == 0 && g.Value() > 0 {
				req["nvidia.com/gpu"] = *resource.NewQuantity(1, resource.DecimalSI)
			}
			p := basePod(fmt.Sprintf("%s-e%d-%d", id, i, j), namespace, id, req)
			p.Spec.NodeName = name
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			if r.Intn(6) == 0 {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
			}
			c.Existing = append(c.Existing, p)
		}
	}

	nPods := 1 + r.Intn(10)
	var last *corev1.Pod
	for k := 0; k < nPods; k++ {
		name := fmt.Sprintf("%s-p%d", id, k)
		if last != nil && r.Intn(3) == 0 {
			// A replica of the previous template.
			p := *last.DeepCopy()
			p.Name = name
			c.Pods = append(c.Pods, p)
			continue
		}
		req := corev1.ResourceList{}
		if v := []int64{0, 100, 250, 500, 1000, 2000, 3000}[r.Intn(7)]; v > 0 {
			req[corev1.ResourceCPU] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		}
		if v := []int64{0, 128, 256, 1024, 4096, 8192}[r.Intn(6)]; v > 0 {
			req[corev1.ResourceMemory] = *resource.NewQuantity(v<<20, resource.BinarySI)
		}
		if r.Intn(5) == 0 {
			req["nvidia.com/gpu"] = *resource.NewQuantity(int64(1+r.Intn(2)), resource.DecimalSI)
		}
		if r.Intn(8) == 0 {
			req[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(5+r.Intn(40))<<30, resource.BinarySI)
		}
		p := basePod(name, namespace, id, req)
		if r.Intn(6) == 0 {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(int64(500+r.Intn(4)*1000), resource.DecimalSI)}}}}
		}
		if r.Intn(10) < 3 {
			p.Spec.NodeSelector[`pool`] = pools[r.Intn(len(pools))]
		}
		if r.Intn(10) < 3 {
			op := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists}[r.Intn(3)]
			req := corev1.NodeSelectorRequirement{Key: "zone", Operator: op, Values: []string{zones[r.Intn(2)]}}
			if op == corev1.NodeSelectorOpExists {
				req = corev1.NodeSelectorRequirement{Key: "disk", Operator: op}
			}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{req}}}},
				// Preferred terms only score: the verdict must not depend on them.
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu"}}}}}},
			}}
		}
		for _, tol := range []corev1.Toleration{
			{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: pools[r.Intn(len(pools))], Effect: corev1.TaintEffectNoSchedule},
			{Key: "maintenance", Operator: corev1.TolerationOpExists},
			{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		} {
			if r.Intn(2) == 0 {
				p.Spec.Tolerations = append(p.Spec.Tolerations, tol)
			}
		}
		if r.Intn(25) == 0 {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}
		if r.Intn(10) == 0 {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		}
		c.Pods = append(c.Pods, p)
		last = &c.Pods[len(c.Pods)-1]
	}
	return c
}

func basePod(name, namespace, caseID string, req corev1.ResourceList) corev1.Pod {
	no := false
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{CaseLabel: caseID}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{CaseLabel: caseID},
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: extendedLimits(req)}}},
		},
	}
}

// extendedLimits: extended resources need limits equal to requests.
func extendedLimits(req corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for k, v := range req {
		if k == "nvidia.com/gpu" {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[k] = v.DeepCopy()
		}
	}
	return out
}
