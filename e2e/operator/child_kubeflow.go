package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Polyaxon's main container in MPI runs (polyaxon _k8s/converter/mixins.py MPIJobMixin); the
// training operator looks for "mpi" unless told (mloperator managers/mpijob.go tells it).
const mpiMainContainer = "polyaxon-main"

// kfConverter turns a KfJob's <kind>JobSpec into a kubeflow.org/v1 job of backend b, with
// replicaSpecs (Polyaxon's replica templates, unchanged) under replicasField.
func kfConverter(b Backend, replicasField string) func(*unstructured.Unstructured, map[string]any) (*Desired, error) {
	return func(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error) {
		replicas, ok := spec["replicaSpecs"].(map[string]any)
		if !ok || len(replicas) == 0 {
			return nil, invalid("%s %s: the %s spec has no replicaSpecs", cr.GetKind(), cr.GetName(), b.Kind)
		}
		t := termination(cr.Object)
		runPolicy := map[string]any{"backoffLimit": backoffLimit(t)}
		copyFields(runPolicy, t, "activeDeadlineSeconds", "ttlSecondsAfterFinished")
		copyFields(runPolicy, spec, "cleanPodPolicy", "schedulingPolicy")

		job := map[string]any{"runPolicy": runPolicy, replicasField: replicas}
		switch b.Kind {
		case tfJob.Kind:
			copyFields(job, spec, "enableDynamicWorker", "successPolicy")
		case pytorchJob.Kind:
			copyFields(job, spec, "elasticPolicy")
			// Polyaxon writes nProcPerNode; its CRD and the training operator say nprocPerNode.
			for _, k := range []string{"nprocPerNode", "nProcPerNode"} {
				if v, ok := spec[k]; ok && v != nil {
					job["nprocPerNode"] = fmt.Sprint(v)
					break
				}
			}
		case mpiJob.Kind:
			copyFields(job, spec, "slotsPerWorker")
			job["mainContainer"] = mpiMainContainer
		}
		return &Desired{Backend: b, Primary: newChild(cr, b, cr.GetName(), job)}, nil
	}
}
