package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Reconciler brings one custom resource's children and status in line with it. Children are
// read from the API server, not a cache, so a child just created or just deleted is seen as
// it is.
type Reconciler struct {
	Dyn    dynamic.Interface
	Config Config
	Log    *slog.Logger
	Report func(Report) // receives each transition to report; nil reports nothing
	Now    func() time.Time
}

// Reasons of the conditions the operator writes itself.
const (
	reasonOperator = "OperatorController" // mloperator's reason for its own transitions
	reasonDisabled = "OperatorBackendDisabled"
	reasonInvalid  = "OperatorInvalidSpec"
	reasonDeleted  = "OperatorChildDeleted"
)

// Reconcile handles the resource gvr namespace/name: create its children once, then record
// each step of their progress (Starting, Running, Succeeded or Failed) in its status.
func (r *Reconciler) Reconcile(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error {
	cr, err := r.Dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted: the garbage collector removes its children
	}
	if err != nil {
		return err
	}
	phase := PhaseOf(cr)
	if cr.GetDeletionTimestamp() != nil || phase.Done() {
		return nil
	}

	d, err := Convert(cr, r.Config.enabled)
	var disabled *DisabledError
	var bad *InvalidError
	switch {
	case errors.As(err, &disabled):
		return r.transition(ctx, gvr, cr, Observation{Phase: Failed, Reason: reasonDisabled, Message: err.Error()})
	case errors.As(err, &bad):
		return r.transition(ctx, gvr, cr, Observation{Phase: Failed, Reason: reasonInvalid, Message: err.Error()})
	case err != nil:
		return err
	}

	child, err := r.Dyn.Resource(d.Backend.GVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && phase == Pending:
		for _, obj := range d.Objects() {
			if err := r.create(ctx, obj); err != nil {
				return err
			}
		}
		return r.transition(ctx, gvr, cr, Observation{Phase: Starting, Reason: reasonOperator, Message: "Operation is starting"})
	case apierrors.IsNotFound(err):
		return r.transition(ctx, gvr, cr, Observation{Phase: Failed, Reason: reasonDeleted,
			Message: fmt.Sprintf("the %s %s was deleted before the run finished", d.Backend.Kind, name)})
	case err != nil:
		return err
	}
	if !controlledBy(child, cr) {
		// A run deleted and created again under the same name: wait for the old child to go.
		return fmt.Errorf("%s %s/%s is not controlled by %s uid %s yet", d.Backend.Kind, namespace, name, cr.GetKind(), cr.GetUID())
	}
	for _, obj := range d.Extras {
		if err := r.create(ctx, obj); err != nil {
			return err
		}
	}
	if phase == Pending { // created, but the status was not written
		return r.transition(ctx, gvr, cr, Observation{Phase: Starting, Reason: reasonOperator, Message: "Operation is starting"})
	}
	obs, ok := Observe(d.Backend, child)
	if !ok {
		if obs, ok = r.unschedulable(ctx, cr); !ok {
			return nil
		}
	}
	if !obs.Phase.after(phase) {
		return nil
	}
	return r.transition(ctx, gvr, cr, obs)
}

// unschedulable is the run's Unschedulable phase when a pod of it (app.kubernetes.io/instance
// is the run's uuid) is Pending with the scheduler's PodScheduled=False, reason Unschedulable:
// the operator reports it, with the scheduler's message, so the run says why it waits.
func (r *Reconciler) unschedulable(ctx context.Context, cr *unstructured.Unstructured) (Observation, bool) {
	uuid := cr.GetLabels()[labelInstance]
	if uuid == "" {
		return Observation{}, false
	}
	pods, err := r.Dyn.Resource(podsGVR).Namespace(cr.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labelInstance + "=" + uuid})
	if err != nil {
		r.Log.Warn("list the run's pods", "uuid", uuid, "err", err)
		return Observation{}, false
	}
	for i := range pods.Items {
		conds, _, _ := unstructured.NestedSlice(pods.Items[i].Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c != nil && c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable" {
				return Observation{Phase: Unschedulable, Reason: "PodUnschedulable", Message: str(c["message"])}, true
			}
		}
	}
	return Observation{}, false
}

// create makes obj unless it exists.
func (r *Reconciler) create(ctx context.Context, obj *unstructured.Unstructured) error {
	gvr, err := gvrOf(obj)
	if err != nil {
		return err
	}
	_, err = r.Dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	r.Log.Info("created "+obj.GetAPIVersion()+" "+obj.GetKind(), "namespace", obj.GetNamespace(), "name", obj.GetName())
	return nil
}

// transition records o as cr's latest condition and hands it to Report.
func (r *Reconciler) transition(ctx context.Context, gvr schema.GroupVersionResource, cr *unstructured.Unstructured, o Observation) error {
	now := r.Now()
	if o.Reason == "" {
		o.Reason = reasonOperator
	}
	c := Condition{Type: o.Phase, Status: "True", Reason: o.Reason, Message: o.Message, LastUpdateTime: now, LastTransitionTime: now}
	if _, err := r.Dyn.Resource(gvr).Namespace(cr.GetNamespace()).UpdateStatus(ctx, withCondition(cr, c), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
	}
	r.Log.Info("run "+o.Phase.Status(), "kind", cr.GetKind(), "namespace", cr.GetNamespace(), "name", cr.GetName(), "reason", o.Reason, "message", o.Message)
	if r.Config.SetAgent && r.Report != nil {
		if rep, ok := reportFor(cr, c); ok {
			r.Report(rep)
		}
	}
	return nil
}

// gvrOf is the resource of a child the operator made.
func gvrOf(obj *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	for _, b := range append(backends, coreService) {
		if b.Kind == obj.GetKind() && b.APIVersion() == obj.GetAPIVersion() {
			return b.GVR, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no resource for %s %s", obj.GetAPIVersion(), obj.GetKind())
}
