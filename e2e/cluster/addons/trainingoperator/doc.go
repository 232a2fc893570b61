// Package trainingoperator is the Kubeflow training operator (v1.8.1,
// e2e/scripts/build-training-operator.sh) beside a cluster: its CRDs (ApplyKubeflowCRDs), its
// manager run as a process on this machine (Operator.Run), and the kwok stage that ends its
// jobs' pods on the local provider as their training would (KubeflowPodsCompleteStage).
package trainingoperator
