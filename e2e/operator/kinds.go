package operator

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The custom resources the agent creates (polyaxon _k8s/custom_resources/operation.py).
const (
	Group      = "polyaxon.com"
	Version    = "v1"
	APIVersion = Group + "/" + Version
)

// CustomResources maps each kind of polyaxon.com/v1 object to its resource.
var CustomResources = map[string]schema.GroupVersionResource{
	"Job":     {Group: Group, Version: Version, Resource: "jobs"},
	"Service": {Group: Group, Version: Version, Resource: "services"},
	"KfJob":   {Group: Group, Version: Version, Resource: "kfjobs"},
	"Cluster": {Group: Group, Version: Version, Resource: "clusters"},
}

// Backend is a kind of object the operator creates for a run.
type Backend struct {
	Kind   string
	GVR    schema.GroupVersionResource
	Switch string // the environment key that enables it; "" for the built-in kinds
}

// APIVersion is the backend's group/version, as objects carry it.
func (b Backend) APIVersion() string { return b.GVR.GroupVersion().String() }

var (
	batchJob    = Backend{Kind: "Job", GVR: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}}
	deployment  = Backend{Kind: "Deployment", GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}
	coreService = Backend{Kind: "Service", GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}}
	tfJob       = kubeflow("TFJob", "tfjobs", "POLYAXON_TFJOB_ENABLED")
	pytorchJob  = kubeflow("PyTorchJob", "pytorchjobs", "POLYAXON_PYTORCH_JOB_ENABLED")
	mpiJob      = kubeflow("MPIJob", "mpijobs", "POLYAXON_MPIJOB_ENABLED")
	// Since 2.12 clusters, not jobs: the chart's operator Role grants rayclusters and
	// daskclusters (polyaxon/charts operator-sa.yaml).
	rayCluster = Backend{Kind: "RayCluster", GVR: schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"},
		Switch: "POLYAXON_RAY_CLUSTER_ENABLED"}
	daskCluster = Backend{Kind: "DaskCluster", GVR: schema.GroupVersionResource{Group: "kubernetes.dask.org", Version: "v1", Resource: "daskclusters"},
		Switch: "POLYAXON_DASK_CLUSTER_ENABLED"}
)

// backends whose state is a run's: the operator watches those that are enabled.
var backends = []Backend{batchJob, deployment, tfJob, pytorchJob, mpiJob, rayCluster, daskCluster}

func kubeflow(kind, resource, key string) Backend {
	return Backend{Kind: kind, GVR: schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: resource}, Switch: key}
}

// podsGVR is the runs' pods, watched for the scheduler's verdict (Unschedulable).
var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
