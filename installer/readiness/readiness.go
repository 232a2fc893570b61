// Package readiness says whether the workloads the installer waits for serve, and waits for
// them while it says how far they are. A workload is ready by kstatus's rules (cli-utils: the
// ones kubectl's tooling, Flux and Argo CD share): its controller has seen the newest spec
// (observedGeneration), and every replica is updated and available. A count of ready replicas
// alone would call a Deployment ready while its old pods still serve and the new ones crash.
package readiness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Workload names a Deployment or a StatefulSet.
type Workload struct {
	Kind, Name string
}

func (w Workload) String() string { return w.Kind + " " + w.Name }

// State is where a workload stands.
type State struct {
	Workload
	Ready bool
	// Message is kstatus's account ("Deployment is not ready. status: 1 of 2 updated replicas
	// available"), or why the workload could not be read.
	Message string
}

func (s State) String() string {
	if s.Ready {
		return s.Workload.String() + ": ready"
	}
	return s.Workload.String() + ": " + s.Message
}

// Of reads one workload and tells whether it is ready.
func Of(ctx context.Context, kube kubernetes.Interface, namespace string, w Workload) State {
	var obj runtime.Object
	var err error
	switch w.Kind {
	case "Deployment":
		obj, err = kube.AppsV1().Deployments(namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "StatefulSet":
		obj, err = kube.AppsV1().StatefulSets(namespace).Get(ctx, w.Name, metav1.GetOptions{})
	default:
		return State{Workload: w, Message: "not a Deployment or a StatefulSet"}
	}
	if apierrors.IsNotFound(err) {
		return State{Workload: w, Message: "not found"}
	}
	if err != nil {
		return State{Workload: w, Message: err.Error()}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return State{Workload: w, Message: err.Error()}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind(w.Kind)
	res, err := status.Compute(u)
	if err != nil {
		return State{Workload: w, Message: err.Error()}
	}
	return State{Workload: w, Ready: res.Status == status.CurrentStatus, Message: res.Message}
}

// Waiter waits for workloads to be ready, saying how far they are.
type Waiter struct {
	Kube      kubernetes.Interface
	Namespace string
	// Poll is how often the workloads are read (default 2s).
	Poll time.Duration
	// Report, when set, gets the workloads not ready yet each time that changes, and at
	// least every Every (default 10s) while it does not: the user sees the wait move.
	Report func(waited time.Duration, notReady []State)
	Every  time.Duration
}

// Wait returns once every workload is ready; after timeout (or ctx's end) its error names each
// one that is not, with kstatus's account of it.
func (w Waiter) Wait(ctx context.Context, timeout time.Duration, workloads ...Workload) error {
	poll := w.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	start := time.Now()
	var notReady []State
	beat := Heartbeat{Every: w.Every}
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		notReady = notReady[:0]
		for _, wl := range workloads {
			if s := Of(ctx, w.Kube, w.Namespace, wl); !s.Ready {
				notReady = append(notReady, s)
			}
		}
		if w.Report != nil && len(notReady) > 0 {
			if beat.Due(Describe(notReady)) {
				w.Report(time.Since(start), notReady)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("not ready after %s: %s: %w", time.Since(start).Round(time.Second), Describe(notReady), err)
	}
	return nil
}

// Describe lists states in a stable order, for a progress line or an error.
func Describe(states []State) string {
	parts := make([]string, 0, len(states))
	for _, s := range states {
		parts = append(parts, s.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
