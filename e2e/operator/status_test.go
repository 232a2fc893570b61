package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestConditionsOnePerTypeLatestLast(t *testing.T) {
	cr := fixture(t, "job")
	assert.Equal(t, Pending, PhaseOf(cr))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cr = withCondition(cr, Condition{Type: Starting, Status: "True", Reason: "OperatorController", Message: "Operation is starting", LastUpdateTime: t0, LastTransitionTime: t0})
	assert.Equal(t, Starting, PhaseOf(cr))
	cr = withCondition(cr, Condition{Type: Running, Status: "True", Reason: "OperatorController", LastUpdateTime: t0.Add(time.Minute), LastTransitionTime: t0.Add(time.Minute)})
	cr = withCondition(cr, Condition{Type: Running, Status: "True", Reason: "OperatorController", LastUpdateTime: t0.Add(2 * time.Minute), LastTransitionTime: t0.Add(2 * time.Minute)})
	assert.Equal(t, Running, PhaseOf(cr))

	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	require.Len(t, conds, 2)
	assert.Equal(t, map[string]any{
		"type": "Starting", "status": "True", "reason": "OperatorController", "message": "Operation is starting",
		"lastUpdateTime": "2026-01-02T03:04:05Z", "lastTransitionTime": "2026-01-02T03:04:05Z",
	}, conds[0])
	assert.Equal(t, "2026-01-02T03:06:05Z", conds[1].(map[string]any)["lastUpdateTime"])
	start, _, _ := unstructured.NestedString(cr.Object, "status", "startTime")
	assert.Equal(t, "2026-01-02T03:04:05Z", start)
	_, done, _ := unstructured.NestedString(cr.Object, "status", "completionTime")
	assert.False(t, done)

	cr = withCondition(cr, Condition{Type: Succeeded, Status: "True", LastUpdateTime: t0.Add(time.Hour), LastTransitionTime: t0.Add(time.Hour)})
	assert.Equal(t, Succeeded, PhaseOf(cr))
	end, _, _ := unstructured.NestedString(cr.Object, "status", "completionTime")
	assert.Equal(t, "2026-01-02T04:04:05Z", end)
}

func TestWithConditionLeavesTheInputAlone(t *testing.T) {
	cr := fixture(t, "job")
	_ = withCondition(cr, Condition{Type: Starting, Status: "True"})
	_, found, _ := unstructured.NestedFieldNoCopy(cr.Object, "status")
	assert.False(t, found)
}
