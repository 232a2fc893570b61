package operator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func withStatus(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"status": status}}
}

func cond(t, status string, extra ...string) any {
	c := map[string]any{"type": t, "status": status}
	if len(extra) == 2 {
		c["reason"], c["message"] = extra[0], extra[1]
	}
	return c
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend Backend
		status  map[string]any
		want    Phase
		reason  string
	}{
		{"job with no status yet", batchJob, nil, Pending, ""},
		{"job pod created but not ready", batchJob, map[string]any{"active": int64(1)}, Pending, ""},
		{"job pod ready", batchJob, map[string]any{"active": int64(1), "ready": int64(1)}, Running, reasonOperator},
		{"job complete", batchJob, map[string]any{"succeeded": int64(1), "conditions": []any{cond("SuccessCriteriaMet", "True"), cond("Complete", "True")}}, Succeeded, reasonOperator},
		{"job failed", batchJob, map[string]any{"failed": int64(1), "conditions": []any{cond("FailureTarget", "True"), cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")}}, Failed, "BackoffLimitExceeded"},
		{"job condition not true", batchJob, map[string]any{"conditions": []any{cond("Complete", "False")}}, Pending, ""},
		{"deployment without ready pods", deployment, map[string]any{"replicas": int64(2)}, Pending, ""},
		{"deployment with a ready pod", deployment, map[string]any{"readyReplicas": int64(1)}, Running, reasonOperator},
		{"pytorchjob created", pytorchJob, map[string]any{"conditions": []any{cond("Created", "True")}}, Pending, ""},
		{"pytorchjob running", pytorchJob, map[string]any{"conditions": []any{cond("Created", "True"), cond("Running", "True")}}, Running, reasonOperator},
		{"pytorchjob succeeded", pytorchJob, map[string]any{"conditions": []any{cond("Created", "True"), cond("Running", "False"), cond("Succeeded", "True")}}, Succeeded, reasonOperator},
		{"tfjob failed", tfJob, map[string]any{"conditions": []any{cond("Running", "False"), cond("Failed", "True", "TFJobFailed", "TFJob x is failed because 1 Worker replica(s) failed.")}}, Failed, "TFJobFailed"},
		{"mpijob running", mpiJob, map[string]any{"conditions": []any{cond("Running", "True")}}, Running, reasonOperator},
		{"raycluster ready", rayCluster, map[string]any{"state": "ready"}, Running, reasonOperator},
		{"raycluster failed", rayCluster, map[string]any{"state": "failed", "reason": "head pod failed"}, Failed, "RayClusterFailed"},
		{"daskcluster pending", daskCluster, map[string]any{"phase": "Pending"}, Pending, ""},
		{"daskcluster running", daskCluster, map[string]any{"phase": "Running"}, Running, reasonOperator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := Observe(tc.backend, withStatus(tc.status))
			assert.Equal(t, tc.want != Pending, ok)
			assert.Equal(t, tc.want, o.Phase)
			assert.Equal(t, tc.reason, o.Reason)
		})
	}
}

func TestObserveKeepsTheChildsFailureMessage(t *testing.T) {
	o, _ := Observe(batchJob, withStatus(map[string]any{"conditions": []any{cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")}}))
	assert.Equal(t, "Job was active longer than specified deadline", o.Message)
}

func TestPhasesOnlyMoveForward(t *testing.T) {
	assert.True(t, Starting.after(Pending))
	assert.True(t, Running.after(Starting))
	assert.True(t, Succeeded.after(Running))
	assert.True(t, Failed.after(Starting), "a run may fail before it runs")
	assert.False(t, Running.after(Running))
	assert.False(t, Starting.after(Running))
	assert.False(t, Failed.after(Succeeded))
	assert.True(t, Succeeded.Done() && Failed.Done() && Stopped.Done())
	assert.False(t, Running.Done())
	assert.Equal(t, "succeeded", Succeeded.Status())
}
