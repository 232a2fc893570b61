package adopt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

// ReplicasAnnotation remembers, on each workload of the old release that adopt stopped, how
// many replicas it had: the way back (undo, `recover`) reads it, even after a crash.
const ReplicasAnnotation = "polyaxon-deploy/replicas-before-adopt"

// workloads scales the old release's Deployments and StatefulSets.
type workloads struct {
	kube    kubernetes.Interface
	ns      string
	poll    time.Duration
	timeout time.Duration
	// say gets what a wait waits for, at least every readiness.DefaultEvery (nil: silent).
	say func(string)
}

// stop scales each workload to zero, remembering its replicas (annotation and record), and
// waits until its pods are gone.
func (w *workloads) stop(ctx context.Context, objs []Object, rec *Record) error {
	if rec.Replicas == nil {
		rec.Replicas = map[string]int32{}
	}
	for _, o := range objs {
		want, _, ann, err := replicasOf(ctx, w.kube, w.ns, o)
		if err != nil {
			return fmt.Errorf("%s: %w", o, err)
		}
		if v, ok := ann[ReplicasAnnotation]; ok { // stopped by an earlier run: its number is the truth
			if n, err := strconv.Atoi(v); err == nil {
				want = int32(n)
			}
		}
		rec.Replicas[o.String()] = want
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}},"spec":{"replicas":0}}`, ReplicasAnnotation, want)
		if err := w.patch(ctx, o, patch); err != nil {
			return err
		}
	}
	return w.waitPodsGone(ctx, objs)
}

// start scales each workload back to the replicas it had and waits until it is ready.
func (w *workloads) start(ctx context.Context, objs []Object, rec *Record) error {
	var errs []error
	for _, o := range objs {
		_, _, ann, err := replicasOf(ctx, w.kube, w.ns, o)
		if apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s is gone: the old release cannot serve again without it", o))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, known := rec.Replicas[o.String()]
		if v, ok := ann[ReplicasAnnotation]; ok {
			if a, err := strconv.Atoi(v); err == nil {
				n, known = int32(a), true
			}
		}
		if !known {
			continue // never stopped
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, ReplicasAnnotation, n)
		if err := w.patch(ctx, o, patch); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return w.waitReady(ctx, objs)
}

func (w *workloads) patch(ctx context.Context, o Object, patch string) error {
	var err error
	switch o.Kind {
	case "Deployment":
		_, err = w.kube.AppsV1().Deployments(w.ns).Patch(ctx, o.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	default:
		_, err = w.kube.AppsV1().StatefulSets(w.ns).Patch(ctx, o.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("scaling %s/%s: %w", w.ns, o, err)
	}
	return nil
}

// selector returns the label selector of a workload's pods.
func (w *workloads) selector(ctx context.Context, o Object) (string, error) {
	var sel *metav1.LabelSelector
	switch o.Kind {
	case "Deployment":
		d, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		sel = d.Spec.Selector
	default:
		s, err := w.kube.AppsV1().StatefulSets(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		sel = s.Spec.Selector
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", err
	}
	if s.Empty() {
		return "", fmt.Errorf("%s has an empty selector", o)
	}
	return s.String(), nil
}

func (w *workloads) waitPodsGone(ctx context.Context, objs []Object) error {
	var left []string
	sayer := readiness.NewSayer(w.say, "waiting for the old release's pods to stop", w.timeout)
	err := wait.PollUntilContextTimeout(ctx, w.poll, w.timeout, true, func(ctx context.Context) (bool, error) {
		defer func() {
			if len(left) > 0 {
				sayer.Tick(fmt.Sprintf("%d still running: %s", len(left), strings.Join(left, ", ")))
			}
		}()
		left = left[:0]
		for _, o := range objs {
			sel, err := w.selector(ctx, o)
			if err != nil {
				return false, nil
			}
			pods, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					left = append(left, p.Name)
				}
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the old release's pods to stop (still there: %s): %w", strings.Join(left, ", "), err)
	}
	return nil
}

func (w *workloads) waitReady(ctx context.Context, objs []Object) error {
	wl := make([]readiness.Workload, 0, len(objs))
	for _, o := range objs {
		wl = append(wl, readiness.Workload{Kind: o.Kind, Name: o.Name})
	}
	waiter := readiness.Waiter{Kube: w.kube, Namespace: w.ns, Poll: w.poll}
	if w.say != nil {
		waiter.Report = func(waited time.Duration, notReady []readiness.State) {
			w.say(fmt.Sprintf("waiting for the old release to serve again (%s of %s): %s", waited.Round(time.Second), w.timeout, readiness.Describe(notReady)))
		}
	}
	if err := waiter.Wait(ctx, w.timeout, wl...); err != nil {
		return fmt.Errorf("waiting for the old release to serve again: %w", err)
	}
	return nil
}

// keepsData reports whether a StatefulSet keeps its data on volumes that outlive its pods:
// one that does not (an emptyDir) would come back empty, so adopt leaves it running.
func (w *workloads) keepsData(ctx context.Context, name string) (bool, error) {
	s, err := w.kube.AppsV1().StatefulSets(w.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return len(s.Spec.VolumeClaimTemplates) > 0, nil
}

// claimsOf lists the PersistentVolumeClaims of the old release's StatefulSets (what
// --purge-old-data deletes): <template>-<statefulset>-<ordinal>.
func (w *workloads) claimsOf(ctx context.Context, objs []Object) ([]string, error) {
	pvcs, err := w.kube.CoreV1().PersistentVolumeClaims(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		if o.Kind != "StatefulSet" {
			continue
		}
		s, err := w.kube.AppsV1().StatefulSets(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, t := range s.Spec.VolumeClaimTemplates {
			prefix := t.Name + "-" + s.Name + "-"
			for _, p := range pvcs.Items {
				if rest, ok := strings.CutPrefix(p.Name, prefix); ok {
					if _, err := strconv.Atoi(rest); err == nil {
						out = append(out, p.Name)
					}
				}
			}
		}
	}
	return out, nil
}
