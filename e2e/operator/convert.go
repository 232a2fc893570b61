package operator

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Desired is what one custom resource becomes.
type Desired struct {
	Backend Backend
	Primary *unstructured.Unstructured   // the object whose state is the run's
	Extras  []*unstructured.Unstructured // created beside it (a service's Service)
}

// Objects is every object of d, the primary first.
func (d *Desired) Objects() []*unstructured.Unstructured {
	return append([]*unstructured.Unstructured{d.Primary}, d.Extras...)
}

// DisabledError: the run needs a backend whose switch is off.
type DisabledError struct{ Backend Backend }

func (e *DisabledError) Error() string {
	return fmt.Sprintf("%s runs are disabled: the operator has %s unset or false", e.Backend.Kind, e.Backend.Switch)
}

// InvalidError: the resource's body is not one the operator knows.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// converters, in the order mloperator's reconcileOperation tries the spec fields.
var converters = []struct {
	field   string
	convert func(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error)
}{
	{"batchJobSpec", convertJob},
	{"serviceSpec", convertService},
	{"tfJobSpec", kfConverter(tfJob, "tfReplicaSpecs")},
	{"pytorchJobSpec", kfConverter(pytorchJob, "pytorchReplicaSpecs")},
	{"mpiJobSpec", kfConverter(mpiJob, "mpiReplicaSpecs")},
	{"rayClusterSpec", convertRay},
	{"daskClusterSpec", convertDask},
}

// Convert returns the objects cr becomes, named as cr and controlled by it. The spec field
// present decides the backend; enabled says which backends the operator may create.
func Convert(cr *unstructured.Unstructured, enabled func(Backend) bool) (*Desired, error) {
	for _, c := range converters {
		spec, found, err := unstructured.NestedMap(cr.Object, c.field)
		if err != nil {
			return nil, invalid("%s: %v", c.field, err)
		}
		if !found {
			continue
		}
		d, err := c.convert(cr, spec)
		if err != nil {
			return nil, err
		}
		if !enabled(d.Backend) {
			return nil, &DisabledError{Backend: d.Backend}
		}
		return d, nil
	}
	return nil, invalid("%s %s has none of the fields the operator reconciles (batchJobSpec, serviceSpec, tfJobSpec, pytorchJobSpec, mpiJobSpec, rayClusterSpec, daskClusterSpec)", cr.GetKind(), cr.GetName())
}

// newChild is an object of kind b for cr: cr's name, namespace, labels and annotations, and a
// controller reference to cr so that deleting the run deletes it.
func newChild(cr *unstructured.Unstructured, b Backend, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(b.APIVersion())
	u.SetKind(b.Kind)
	u.SetName(name)
	u.SetNamespace(cr.GetNamespace())
	u.SetLabels(cr.GetLabels())
	u.SetAnnotations(cr.GetAnnotations())
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion:         cr.GetAPIVersion(),
		Kind:               cr.GetKind(),
		Name:               cr.GetName(),
		UID:                cr.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}})
	return u
}

// controlledBy says whether obj's controller is cr.
func controlledBy(obj, cr *unstructured.Unstructured) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == cr.GetUID()
}
