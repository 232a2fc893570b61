package operator

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition is one entry of a resource's status.conditions (the CRDs' status schema; mloperator
// api/v1/condition.go): one per type, the latest last.
type Condition struct {
	Type               Phase
	Status             string // "True"
	Reason, Message    string
	LastUpdateTime     time.Time
	LastTransitionTime time.Time
}

// PhaseOf is the resource's phase: the type of its latest true condition.
func PhaseOf(cr *unstructured.Unstructured) Phase {
	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for i := len(conds) - 1; i >= 0; i-- {
		c, _ := conds[i].(map[string]any)
		if c != nil && c["status"] == "True" {
			return Phase(str(c["type"]))
		}
	}
	return Pending
}

// withCondition returns a copy of cr whose status has c as its latest condition, with
// startTime set on the first and completionTime on a final one.
func withCondition(cr *unstructured.Unstructured, c Condition) *unstructured.Unstructured {
	out := cr.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(out.Object, "status", "conditions")
	kept := make([]any, 0, len(conds)+1)
	for _, old := range conds {
		if m, _ := old.(map[string]any); m == nil || m["type"] != string(c.Type) {
			kept = append(kept, old)
		}
	}
	kept = append(kept, map[string]any{
		"type":               string(c.Type),
		"status":             c.Status,
		"reason":             c.Reason,
		"message":            c.Message,
		"lastUpdateTime":     stamp(c.LastUpdateTime),
		"lastTransitionTime": stamp(c.LastTransitionTime),
	})
	status, _, _ := unstructured.NestedMap(out.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	status["conditions"] = kept
	if _, ok := status["startTime"]; !ok {
		status["startTime"] = stamp(c.LastTransitionTime)
	}
	if c.Type.Done() {
		status["completionTime"] = stamp(c.LastTransitionTime)
	}
	out.Object["status"] = status
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
