package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// Backend is a distributed-run kind a values switch lets Polyaxon's operator create, with the
// custom resources the cluster must serve for it and who installs them. The chart does not
// install them: they belong to the backend's own operator, whose version they must match.
type Backend struct {
	Operator string // the values switch operators.<Operator>, e.g. pytorchjob
	Kinds    []schema.GroupVersionKind
	// Source is where the CRDs (and the controller that acts on them) come from.
	Source string
}

// Value is the backend's values switch.
func (b Backend) Value() string { return "operators." + b.Operator }

const trainingOperator = "the Kubeflow training operator v1.8 (kubectl apply --server-side -k \"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.8.1\")"

func kubeflow(kind string) []schema.GroupVersionKind {
	return []schema.GroupVersionKind{{Group: "kubeflow.org", Version: "v1", Kind: kind}}
}

// Backends are the operators.* switches of the chart. Kinds are what Polyaxon's operator
// creates (mloperator controllers/kinds/versions.go: kubeflow.org/v1 TFJob, PyTorchJob,
// MPIJob; ray.io/v1 RayJob; kubernetes.dask.org/v1 DaskJob) plus the cluster kinds their
// operators make from them.
var Backends = []Backend{
	{Operator: "tfjob", Kinds: kubeflow("TFJob"), Source: trainingOperator},
	{Operator: "pytorchjob", Kinds: kubeflow("PyTorchJob"), Source: trainingOperator},
	{Operator: "mpijob", Kinds: kubeflow("MPIJob"), Source: trainingOperator},
	{Operator: "raycluster", Kinds: []schema.GroupVersionKind{
		{Group: "ray.io", Version: "v1", Kind: "RayJob"}, {Group: "ray.io", Version: "v1", Kind: "RayCluster"}},
		Source: "KubeRay (helm install kuberay-operator kuberay/kuberay-operator)"},
	{Operator: "daskcluster", Kinds: []schema.GroupVersionKind{
		{Group: "kubernetes.dask.org", Version: "v1", Kind: "DaskJob"}, {Group: "kubernetes.dask.org", Version: "v1", Kind: "DaskCluster"}},
		Source: "the Dask Kubernetes operator (helm install dask-kubernetes-operator dask/dask-kubernetes-operator)"},
}

// checkDistributedBackends: every enabled operators.* switch has its custom resources served
// by the API server (asked through discovery: only established CRDs are listed).
func (e *Env) checkDistributedBackends(ctx context.Context) (string, error) {
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	var enabled []Backend
	for _, b := range Backends {
		if v.Operators[b.Operator] {
			enabled = append(enabled, b)
		}
	}
	if len(enabled) == 0 {
		return "", check.Skip("no distributed backend is enabled (operators.*)")
	}
	if e.Clients == nil {
		return "", errors.New("no cluster configured")
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return "", err
	}
	var missing, served []string
	for _, b := range enabled {
		var gone []string
		for _, k := range b.Kinds {
			_, err := mapper.RESTMapping(k.GroupKind(), k.Version)
			switch {
			case meta.IsNoMatchError(err):
				gone = append(gone, k.Kind+" ("+k.GroupVersion().String()+")")
			case err != nil:
				return "", fmt.Errorf("asking the API server for %s: %w", k, err)
			default:
				served = append(served, k.Kind)
			}
		}
		if len(gone) > 0 {
			missing = append(missing, fmt.Sprintf("%s is true but the cluster does not serve %s: install %s, or set %s=false",
				b.Value(), strings.Join(gone, ", "), b.Source, b.Value()))
		}
	}
	if len(missing) > 0 {
		return "", joinErrs(missing, 10)
	}
	return "served: " + strings.Join(served, ", "), nil
}
