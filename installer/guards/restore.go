package guards

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Restore puts each drifted guard back as the revision has it, owned by the release as Helm
// owns it (so the next upgrade or uninstall treats it as its own): a missing one is created (a
// Namespace first, for what lives in it), a changed one gets the revision's compared fields
// (a binding whose roleRef changed, which the API server never lets change, is deleted and
// created again), a Namespace the revision's labels and none of the Pod Security labels it
// does not render. Extra objects (Client.Extra) are not the revision's to restore: Restore
// leaves them.
func (c Client) Restore(ctx context.Context, drifts []Drift, release, namespace string) error {
	drifts = slices.Clone(drifts)
	slices.SortStableFunc(drifts, func(a, b Drift) int {
		return boolRank(a.Manifest.Kind() != "Namespace") - boolRank(b.Manifest.Kind() != "Namespace")
	})
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
		if err == nil {
			err = c.restore(ctx, ri, d, o)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// restore puts one drifted guard back as o (the revision's, with Helm's annotations).
func (c Client) restore(ctx context.Context, ri dynamic.ResourceInterface, d Drift, o *unstructured.Unstructured) error {
	if d.Missing {
		_, err := ri.Create(ctx, o, metav1.CreateOptions{FieldManager: c.FieldManager})
		return err
	}
	if slices.Contains(d.Fields, "roleRef") {
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil {
			return err
		}
		_, err := ri.Create(ctx, o, metav1.CreateOptions{FieldManager: c.FieldManager})
		return err
	}
	live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if o.GetKind() == "Namespace" {
		labels := live.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k := range labels {
			if _, ok := o.GetLabels()[k]; !ok && strings.HasPrefix(k, podSecurityEnforce) {
				delete(labels, k)
			}
		}
		for k, v := range o.GetLabels() {
			labels[k] = v
		}
		live.SetLabels(labels)
	} else {
		for _, f := range compared(o.GetKind()) {
			if v, ok := o.Object[f]; ok {
				live.Object[f] = v
			} else {
				delete(live.Object, f)
			}
		}
	}
	_, err = ri.Update(ctx, live, metav1.UpdateOptions{FieldManager: c.FieldManager})
	return err
}
