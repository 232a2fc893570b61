package operator

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// convertJob: a polyaxon.com Job becomes a batch/v1 Job whose pod template is batchJobSpec's,
// so admission sees the pod exactly as Polyaxon built it.
func convertJob(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error) {
	tmpl, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, invalid("%s %s: batchJobSpec has no template", cr.GetKind(), cr.GetName())
	}
	// Polyaxon leaves restartPolicy to the run's environment; a Job rejects the default
	// (Always), and the operator fills in Never (mloperator managers/jobs.go).
	if rp, _, _ := unstructured.NestedString(tmpl, "spec", "restartPolicy"); rp == "" {
		if err := unstructured.SetNestedField(tmpl, "Never", "spec", "restartPolicy"); err != nil {
			return nil, invalid("%s %s: batchJobSpec.template: %v", cr.GetKind(), cr.GetName(), err)
		}
	}
	t := termination(cr.Object)
	job := map[string]any{
		"template":     tmpl,
		"backoffLimit": backoffLimit(t),
	}
	copyFields(job, t, "activeDeadlineSeconds", "ttlSecondsAfterFinished", "podFailurePolicy")
	return &Desired{Backend: batchJob, Primary: newChild(cr, batchJob, cr.GetName(), job)}, nil
}
