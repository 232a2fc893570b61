package cloudnativepg

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
)

// ClusterGVR is CloudNativePG's Cluster resource.
var ClusterGVR = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"}

// PhaseHealthy is a Cluster's status.phase once every instance is ready and the primary is
// the one it wants (the installer's own reader, installer/cnpg, judges it the same).
const PhaseHealthy = cnpg.HealthyPhase

// ClusterStatus is the part of a Cluster's status the tests read.
type ClusterStatus struct {
	Phase       string `json:"phase"`
	PhaseReason string `json:"phaseReason"`
	// Instances counts the instances' volume groups, ReadyInstances the Ready pods.
	Instances      int `json:"instances"`
	ReadyInstances int `json:"readyInstances"`
	// CurrentPrimary is the pod that is primary; TargetPrimary the one the operator wants to be
	// (they differ during a failover or switchover, "pending" while none is chosen).
	CurrentPrimary          string `json:"currentPrimary"`
	CurrentPrimaryTimestamp string `json:"currentPrimaryTimestamp"`
	TargetPrimary           string `json:"targetPrimary"`
	TargetPrimaryTimestamp  string `json:"targetPrimaryTimestamp"`
	// InstancesStatus lists the pods by state: "healthy", "replicating", "failed".
	InstancesStatus map[string][]string `json:"instancesStatus"`
	TimelineID      int                 `json:"timelineID"`
}

// Healthy says whether the Cluster is in PhaseHealthy with want instances ready and its
// current primary the one it wants.
func (s ClusterStatus) Healthy(want int) bool {
	return s.Phase == PhaseHealthy && s.ReadyInstances == want && s.CurrentPrimary != "" && s.CurrentPrimary == s.TargetPrimary
}

// GetCluster reads a Cluster's status.
func GetCluster(ctx context.Context, c *cluster.Cluster, namespace, name string) (ClusterStatus, error) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return ClusterStatus{}, err
	}
	u, err := dyn.Resource(ClusterGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ClusterStatus{}, err
	}
	var s ClusterStatus
	if st, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &s); err != nil {
			return ClusterStatus{}, fmt.Errorf("Cluster %s/%s: status: %w", namespace, name, err)
		}
	}
	return s, nil
}

// WaitCluster polls a Cluster's status every interval until done says so, and returns the
// last status read; on a timeout (ctx) the error says which status it was. Each change of
// status is passed to seen (when not nil), with the time it was first read.
func WaitCluster(ctx context.Context, c *cluster.Cluster, namespace, name string, interval time.Duration,
	done func(ClusterStatus) bool, seen func(time.Time, ClusterStatus)) (ClusterStatus, error) {
	var last ClusterStatus
	var read bool
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		s, err := GetCluster(ctx, c, namespace, name)
		if err != nil {
			return false, nil //nolint:nilerr // retried: the API server may be busy
		}
		if seen != nil && (!read || fmt.Sprint(s) != fmt.Sprint(last)) {
			seen(time.Now(), s)
		}
		last, read = s, true
		return done(s), nil
	})
	if err != nil {
		return last, fmt.Errorf("Cluster %s/%s: phase %q (%s), %d/%d ready, primary %q (target %q): %w",
			namespace, name, last.Phase, last.PhaseReason, last.ReadyInstances, last.Instances, last.CurrentPrimary, last.TargetPrimary, err)
	}
	return last, nil
}
