package backup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// ReleaseScaler scales a release's database writers to zero: the Deployments of the chart's
// core components (declared once, in files/components.yaml; Postgres, RabbitMQ and Redis are
// dependencies and keep running).
type ReleaseScaler struct {
	Client    kubernetes.Interface
	Namespace string
	// Names select the release's objects (Release.Names).
	Names render.Names
	// Timeout bounds waiting for the writers' pods to be gone (default 5m).
	Timeout time.Duration
	// Poll is the interval of that wait (default 1s).
	Poll time.Duration
	// Say gets what that wait waits for, at least every readiness.DefaultEvery (nil: silent).
	Say func(string)
}

// selector selects the release's objects of components.
func (s *ReleaseScaler) selector(components []string) string {
	return s.Names.ComponentSelector(components...)
}

// ScaleDown scales the writers to zero, remembering their replicas (also in
// an annotation), and waits until their pods are gone.
func (s *ReleaseScaler) ScaleDown(ctx context.Context) (func(context.Context) error, error) {
	if len(s.Names.Selector) == 0 {
		return nil, fmt.Errorf("release %q: no labels to select its Deployments with", s.Names.Release)
	}
	deps := s.Client.AppsV1().Deployments(s.Namespace)
	core := s.selector(contract.EmbeddedComponents().Core)
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: core})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments (%s) in %q: %w", core, s.Namespace, err)
	}
	before := map[string]int32{}
	restore := func(ctx context.Context) error {
		var errs []error
		names := slices.Sorted(maps.Keys(before))
		for _, name := range names {
			errs = append(errs, s.scaleBack(ctx, name, before[name]))
		}
		return errors.Join(errs...)
	}
	var writers []string // the components of the Deployments scaled: their pods must go
	for _, d := range list.Items {
		writers = append(writers, d.Labels[LabelComponent])
		n := replicasOf(&d)
		if recorded, ok := RecordedReplicas(&d); ok && n == 0 {
			n = recorded // an earlier restore was interrupted: its record is the truth
		}
		before[d.Name] = n
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}},"spec":{"replicas":0}}`, ReplicasAnnotation, n)
		if _, err := deps.Patch(ctx, d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return restore, fmt.Errorf("scaling Deployment %s/%s to 0: %w", s.Namespace, d.Name, err)
		}
	}
	timeout, poll := s.Timeout, s.Poll
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	if poll == 0 {
		poll = time.Second
	}
	if len(writers) == 0 {
		return restore, nil
	}
	var left []string
	sayer := readiness.NewSayer(s.Say, "waiting for the database writers' pods to stop", timeout)
	err = wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.selector(writers)})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left = append(left, p.Name)
			}
		}
		if len(left) > 0 {
			sayer.Tick(fmt.Sprintf("%d still running: %s", len(left), strings.Join(left, ", ")))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return restore, fmt.Errorf("waiting for the database writers' pods to stop (still there: %s): %w", strings.Join(left, ", "), err)
	}
	return restore, nil
}

// RecordedReplicas are the replicas a restore recorded before scaling d down; ok is false
// when no restore has d scaled down.
func RecordedReplicas(d *appsv1.Deployment) (n int32, ok bool) {
	a, ok := d.Annotations[ReplicasAnnotation]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(a, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// ScaleBack brings every Deployment of the release that a restore left scaled down (it did
// not finish: killed, or its machine lost) back to the replicas it recorded, and returns
// "name: n" for each.
func (s *ReleaseScaler) ScaleBack(ctx context.Context) ([]string, error) {
	if len(s.Names.Selector) == 0 {
		return nil, nil // no release left to scale
	}
	return s.endScaleDown(ctx, func(_, recorded int32) int32 { return recorded })
}

// ScaleBackUnlessSet ends a scale-down after a Helm apply: a Deployment the apply scaled
// (its manifest's replicas) keeps them and loses the record; one still at zero goes back to
// its record. It returns "name: n" for each.
func (s *ReleaseScaler) ScaleBackUnlessSet(ctx context.Context) ([]string, error) {
	return s.endScaleDown(ctx, func(now, recorded int32) int32 {
		if now != 0 {
			return now
		}
		return recorded
	})
}

// endScaleDown sets each Deployment with a recorded scale-down to replicas(now, recorded) and
// drops the record.
func (s *ReleaseScaler) endScaleDown(ctx context.Context, replicas func(now, recorded int32) int32) ([]string, error) {
	deps := s.Client.AppsV1().Deployments(s.Namespace)
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: s.Names.SelectorString()})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments (%s) in %q: %w", s.Names.SelectorString(), s.Namespace, err)
	}
	var done []string
	var errs []error
	for _, d := range list.Items {
		recorded, ok := RecordedReplicas(&d)
		if !ok {
			continue
		}
		n := replicas(replicasOf(&d), recorded)
		if err := s.scaleBack(ctx, d.Name, n); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, fmt.Sprintf("%s: %d", d.Name, n))
	}
	sort.Strings(done)
	return done, errors.Join(errs...)
}

// scaleBack sets a Deployment's replicas and drops the restore's record of them, in one patch.
func (s *ReleaseScaler) scaleBack(ctx context.Context, name string, n int32) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, ReplicasAnnotation, n)
	if _, err := s.Client.AppsV1().Deployments(s.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("Deployment %s/%s back to %d replicas: %w", s.Namespace, name, n, err)
	}
	return nil
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}
