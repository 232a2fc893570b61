package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// The texts people read in `plan` and `check` output, exactly.
func TestSchedulingTexts(t *testing.T) {
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu"}},
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
			{Key: "spot", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true", "yes"}},
		}, MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}},
		}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "gpu", Operator: corev1.NodeSelectorOpExists},
			{Key: "cordon", Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"8"}},
		}},
	}}
	c := CategoryScheduling{
		NodeSelector: map[string]string{"polyaxon": "experiments", "disk": "ssd"},
		Tolerations: []corev1.Toleration{
			{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "team", Operator: corev1.TolerationOpEqual, Value: "ml"},
			{Operator: corev1.TolerationOpExists},
		},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}},
	}
	assert.Equal(t, "nodeSelector disk=ssd,polyaxon=experiments; tolerations [nvidia.com/gpu exists:NoSchedule, team=ml, * exists]; "+
		"required node affinity (pool=gpu,zone in (a,b),spot notin (true,yes),metadata.name=n1) or (gpu,!cordon,cores Gt 8)", c.String())
	assert.Equal(t, "none", CategoryScheduling{}.String())
	assert.Equal(t, "affinity (preferred only)", CategoryScheduling{Affinity: &corev1.Affinity{}}.String())

	one := &corev1.NodeSelector{NodeSelectorTerms: required.NodeSelectorTerms[1:]}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"polyaxon": "jobs"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: one}}}}
	assert.Equal(t, "polyaxon=jobs and gpu,!cordon,cores Gt 8", constraintsText(pod))
	assert.Equal(t, "", constraintsText(&corev1.Pod{}))
	pod.Spec.NodeSelector = nil
	assert.Equal(t, "gpu,!cordon,cores Gt 8", constraintsText(pod), "affinity alone")

	assert.Equal(t, "", indexRanges(nil))
	assert.Equal(t, "0", indexRanges([]int{0}))
	assert.Equal(t, "0-1,3,5-7,9", indexRanges([]int{0, 1, 3, 5, 6, 7, 9}))

	assert.Equal(t, "1500m", amountText(corev1.ResourceCPU, 1500))
	assert.Equal(t, "1Gi", amountText(corev1.ResourceMemory, 1<<30))
	assert.Equal(t, "2Gi", amountText(corev1.ResourceEphemeralStorage, 2<<30))
	assert.Equal(t, "2Mi", amountText("hugepages-2Mi", 2<<20))
	assert.Equal(t, "3", amountText("nvidia.com/gpu", 3))
}

// The scheduler's message sorts lines by their text; the reasons list by count, then name.
func TestFitMessageOrder(t *testing.T) {
	msg, reasons := fitMessage(12, map[string]int{"Insufficient cpu": 3, reasonAffinity: 3, reasonUnschedulable: 10})
	assert.Equal(t, "0/12 nodes are available: 10 node(s) were unschedulable, 3 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.", msg)
	assert.Equal(t, []Reason{{reasonUnschedulable, 10}, {"Insufficient cpu", 3}, {reasonAffinity, 3}}, reasons)
	msg, reasons = fitMessage(0, nil)
	assert.Equal(t, "0/0 nodes are available.", msg)
	assert.Empty(t, reasons)
}
