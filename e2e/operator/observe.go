package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Observation is what a child's status says of the run.
type Observation struct {
	Phase           Phase
	Reason, Message string
}

// Observe reads the run's phase from its child: Running once a pod of it runs, Succeeded or
// Failed from the child's completion conditions. ok is false while the child says nothing yet.
func Observe(b Backend, child *unstructured.Unstructured) (o Observation, ok bool) {
	switch b.Kind {
	case batchJob.Kind:
		return observeJob(child)
	case deployment.Kind:
		if n, _ := asInt64(nested(child, "status", "readyReplicas")); n > 0 {
			return running(fmt.Sprintf("%d of the Deployment's pods ready", n)), true
		}
	case tfJob.Kind, pytorchJob.Kind, mpiJob.Kind:
		return observeKubeflow(child)
	case rayCluster.Kind:
		switch state, _, _ := unstructured.NestedString(child.Object, "status", "state"); state {
		case "ready":
			return running("the RayCluster is ready"), true
		case "failed":
			reason, _, _ := unstructured.NestedString(child.Object, "status", "reason")
			return Observation{Phase: Failed, Reason: "RayClusterFailed", Message: reason}, true
		}
	case daskCluster.Kind:
		if phase, _, _ := unstructured.NestedString(child.Object, "status", "phase"); phase == "Running" {
			return running("the DaskCluster is running"), true
		}
	}
	return Observation{}, false
}

// A batch Job: its Complete or Failed condition, else Running once a pod is ready.
func observeJob(job *unstructured.Unstructured) (Observation, bool) {
	if c := trueCondition(job, "Complete"); c != nil {
		return Observation{Phase: Succeeded, Reason: "OperatorController", Message: "Operation has succeeded"}, true
	}
	if c := trueCondition(job, "Failed"); c != nil {
		return Observation{Phase: Failed, Reason: str(c["reason"]), Message: str(c["message"])}, true
	}
	if n, _ := asInt64(nested(job, "status", "ready")); n > 0 {
		return running(fmt.Sprintf("%d of the Job's pods ready", n)), true
	}
	return Observation{}, false
}

// Kubeflow jobs: their Succeeded, Failed and Running conditions (training operator JobStatus).
func observeKubeflow(job *unstructured.Unstructured) (Observation, bool) {
	if c := trueCondition(job, "Succeeded"); c != nil {
		return Observation{Phase: Succeeded, Reason: "OperatorController", Message: "Operation has succeeded"}, true
	}
	if c := trueCondition(job, "Failed"); c != nil {
		return Observation{Phase: Failed, Reason: str(c["reason"]), Message: str(c["message"])}, true
	}
	if c := trueCondition(job, "Running"); c != nil {
		return running(str(c["message"])), true
	}
	return Observation{}, false
}

func running(detail string) Observation {
	msg := "Operation is running"
	if detail != "" {
		msg += ": " + detail
	}
	return Observation{Phase: Running, Reason: "OperatorController", Message: msg}
}

// trueCondition is obj's status condition of type t when its status is "True".
func trueCondition(obj *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		if c != nil && c["type"] == t && c["status"] == "True" {
			return c
		}
	}
	return nil
}

func nested(obj *unstructured.Unstructured, fields ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, fields...)
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
