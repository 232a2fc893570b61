package release

import (
	"context"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

// workloadProgress prints, while Helm waits, which of the release's Deployments and
// StatefulSets are not ready yet and why (kstatus's account): when that changes, and at least
// every readiness.DefaultEvery (10 s) while it does not.
type workloadProgress struct {
	kube      kubernetes.Interface
	namespace string
	say       func(format string, args ...any)
}

// How often the workloads are read while Helm waits.
const progressPoll = 3 * time.Second

// start watches the workloads of r until the returned stop is called (or they are all ready,
// or the timeout passes).
func (p *workloadProgress) start(ctx context.Context, r kube.ResourceList, timeout time.Duration) (stop func()) {
	if p == nil || p.kube == nil {
		return func() {}
	}
	var workloads []readiness.Workload
	for _, info := range r {
		if info.Mapping == nil || info.Namespace != p.namespace {
			continue
		}
		if kind := info.Mapping.GroupVersionKind.Kind; kind == "Deployment" || kind == "StatefulSet" {
			workloads = append(workloads, readiness.Workload{Kind: kind, Name: info.Name})
		}
	}
	if len(workloads) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = readiness.Waiter{Kube: p.kube, Namespace: p.namespace, Poll: progressPoll,
			Report: func(waited time.Duration, notReady []readiness.State) {
				p.say("waiting for workloads (%s of %s): %d of %d ready; %s", waited.Round(time.Second), timeout,
					len(workloads)-len(notReady), len(workloads), readiness.Describe(notReady))
			}}.Wait(ctx, timeout, workloads...)
	}()
	return func() { cancel(); <-done }
}
