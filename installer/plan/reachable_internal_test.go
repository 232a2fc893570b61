package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Past its work budget the listing of placements stops and the bounds' verdicts stand.
func TestReachableStopsAtItsWorkBudget(t *testing.T) {
	cpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	mk := func(name string, req corev1.ResourceList) PodToPlace {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}
		return PodToPlace{Name: name, Source: SourceRelease, Kind: "Pod", Pod: p}
	}
	nd := func(name string) corev1.Node {
		alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	snap := NewSnapshot([]corev1.Node{nd("a"), nd("b")}, nil)
	pods := []PodToPlace{mk("x", cpu("1")), mk("y", cpu("1")), mk("z", cpu("2")), mk("w", cpu("2"))}
	assert.Equal(t, Unschedulable, Plan(snap, pods).Pods[3].Verdict, "within the budget every placement decides")
	defer func(old int) { maxReachableWork = old }(maxReachableWork)
	// Two nodes feasible for each pod: x, y, z and w meet 1, 2, 3 and 3 states (placements
	// differ in pod counts too), 18 tries in all.
	maxReachableWork = 18
	assert.Equal(t, Unschedulable, Plan(snap, pods).Pods[3].Verdict, "the budget is spent exactly")
	maxReachableWork = 17
	assert.Equal(t, Uncertain, Plan(snap, pods).Pods[3].Verdict, "one try short")
	maxReachableWork = 5
	assert.Equal(t, Uncertain, Plan(snap, pods).Pods[3].Verdict, "past it the bounds decide")
}
