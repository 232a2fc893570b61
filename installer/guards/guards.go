// Package guards keeps the objects that keep runs apart from the platform as a revision of the
// release has them: the run admission policies and their bindings, the runs' NetworkPolicies,
// ResourceQuota and LimitRange. The API server says nothing when one of them is deleted or
// changed (a deleted policy binding simply stops refusing), so `check` compares them with the
// deployed revision and `recover` puts them back.
package guards

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// kinds are the guards' kinds; of them, the chart's run objects carry the component labels
// below (the dependencies' own NetworkPolicies guard them, not runs).
var kinds = []string{
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
	"NetworkPolicy", "ResourceQuota", "LimitRange",
}

var components = []string{"runs", "runs-distributed"}

// Of returns the guards among a revision's manifests.
func Of(r *render.Result) []render.Manifest {
	var out []render.Manifest
	for _, m := range r.Manifests {
		if slices.Contains(kinds, m.Kind()) && slices.Contains(components, m.Object.GetLabels()["app.kubernetes.io/component"]) {
			out = append(out, m)
		}
	}
	return out
}

// Drift is a guard whose live object is not the revision's.
type Drift struct {
	Manifest render.Manifest
	// Missing: deleted; otherwise its spec was changed.
	Missing bool
}

func (d Drift) String() string {
	what := "changed"
	if d.Missing {
		what = "missing"
	}
	return fmt.Sprintf("%s %s %s", d.Manifest.Kind(), name(d.Manifest.Object), what)
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// Client reaches the cluster's objects by kind.
type Client struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// FieldManager names who writes in Restore and in the dry-runs of Compare.
	FieldManager string
}

func (c Client) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace()), nil
	}
	return c.Dynamic.Resource(mapping.Resource), nil
}

// Compare returns the guards that are missing or whose spec differs from the revision's. The
// revision's spec is the one the API server makes of it: a copy under another name is created
// in a dry-run, so defaults the server fills in are no difference.
func (c Client) Compare(ctx context.Context, guards []render.Manifest) ([]Drift, error) {
	var out []Drift
	var errs []error
	for _, g := range guards {
		ri, err := c.resource(g.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		live, err := ri.Get(ctx, g.Object.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out = append(out, Drift{Manifest: g, Missing: true})
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s %s: %w", g.Kind(), name(g.Object), err))
			continue
		}
		want, err := c.asServerMakesIt(ctx, ri, g.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !reflect.DeepEqual(live.Object["spec"], want.Object["spec"]) {
			out = append(out, Drift{Manifest: g})
		}
	}
	return out, errors.Join(errs...)
}

// asServerMakesIt is o as the API server would store it: created in a dry-run under a name no
// object has.
func (c Client) asServerMakesIt(ctx context.Context, ri dynamic.ResourceInterface, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	probe := o.DeepCopy()
	probe.SetName(probeName(o.GetName()))
	out, err := ri.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: c.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("%s %s as the revision has it (a dry-run): %w", o.GetKind(), name(o), err)
	}
	return out, nil
}

// probeName is a name no guard has, within the 63 characters a label-like name may have.
func probeName(n string) string {
	const suffix = "-guard-probe"
	if len(n)+len(suffix) > 63 {
		n = n[:63-len(suffix)]
	}
	return n + suffix
}

// Restore puts each drifted guard back as the revision has it, owned by the release as Helm
// owns it (so the next upgrade or uninstall treats it as its own).
func (c Client) Restore(ctx context.Context, drifts []Drift, release, namespace string) error {
	var errs []error
	for _, d := range drifts {
		o := d.Manifest.Object.DeepCopy()
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["meta.helm.sh/release-name"], ann["meta.helm.sh/release-namespace"] = release, namespace
		o.SetAnnotations(ann)
		ri, err := c.resource(o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d.Missing {
			_, err = ri.Create(ctx, o, metav1.CreateOptions{FieldManager: c.FieldManager})
		} else {
			var live *unstructured.Unstructured
			if live, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err == nil {
				live.Object["spec"] = o.Object["spec"]
				_, err = ri.Update(ctx, live, metav1.UpdateOptions{FieldManager: c.FieldManager})
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
