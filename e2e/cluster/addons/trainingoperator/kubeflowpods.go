package trainingoperator

import (
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// KubeflowKinds are the kinds of the Kubeflow training operator's jobs whose pods
// KubeflowPodsCompleteStage completes.
var KubeflowKinds = []string{"TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob"}

// KubeflowPodsCompleteStage completes the pods of Kubeflow training jobs as kwok's own
// pod-complete stage completes a batch Job's: a Running pod owned by a TFJob, PyTorchJob, ...
// becomes Succeeded with every container terminated with exit code 0, as each replica's
// program does on a node once its training ends; the training operator then marks the job
// Succeeded (a TFJob when its chief succeeded, a PyTorchJob when its master did). Opt-in
// (WithStages): without it such pods stay Running, as a replica that never ends does.
func KubeflowPodsCompleteStage() local.Stage {
	kinds := ""
	for _, k := range KubeflowKinds {
		kinds += "\n      - " + k
	}
	return local.Stage{Name: "polyaxon-deploy-kubeflow-pod-complete", YAML: `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: polyaxon-deploy-kubeflow-pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: ["Running"]
    - key: .metadata.ownerReferences.[].kind
      operator: In
      values:` + kinds + `
  delay:
    durationMilliseconds: 1000
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
`}
}
