package guards

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// podSecurityEnforce starts the labels by which Pod Security admission refuses: one the revision
// does not render (an enforce-version pinned to an old release) changes what the namespace
// enforces. Added warn and audit labels refuse nothing (OpenShift's and Rancher's label
// syncers add them): they are no drift.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// compared are the fields of a kind that say what it allows: RBAC objects have no spec.
func compared(kind string) []string {
	switch kind {
	case "Role":
		return []string{"rules"}
	case "ClusterRole":
		return []string{"rules", "aggregationRule"}
	case "RoleBinding", "ClusterRoleBinding":
		return []string{"roleRef", "subjects"}
	}
	return []string{"spec"}
}

// Drift is a guard whose live object is not the revision's.
type Drift struct {
	Manifest render.Manifest
	// Missing: deleted; otherwise Fields or Labels say what changed.
	Missing bool
	// Fields are the compared fields (spec, rules, roleRef, ...) that differ.
	Fields []string
	// Labels, for a Namespace: each label that differs, "key removed (the revision has v)",
	// "key=v (the revision has w)" or "key=v added".
	Labels []string
}

func (d Drift) String() string {
	head := d.Manifest.Kind() + " " + name(d.Manifest.Object)
	switch {
	case d.Missing:
		return head + " missing"
	case len(d.Labels) > 0:
		return head + " labels changed: " + strings.Join(d.Labels, ", ")
	}
	return head + " changed (" + strings.Join(d.Fields, ", ") + ")"
}

// Compare returns the guards that are missing or whose compared fields differ from the
// revision's; of a Namespace, its labels. The revision's fields are the ones the API server
// makes of them: a copy under another name is created in a dry-run, so defaults the server
// fills in are no difference.
func (c Client) Compare(ctx context.Context, guards []render.Manifest) ([]Drift, error) {
	return c.compare(ctx, guards, true)
}

// Missing returns the guards that are missing and, of a Namespace, its changed labels: what
// reading alone tells (Compare's dry-run creates need the rights to create each kind, which
// the exporter must not hold).
func (c Client) Missing(ctx context.Context, guards []render.Manifest) ([]Drift, error) {
	return c.compare(ctx, guards, false)
}

func (c Client) compare(ctx context.Context, guards []render.Manifest, fields bool) ([]Drift, error) {
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
		if g.Kind() == "Namespace" {
			// Labels are not defaulted (but kubernetes.io/metadata.name, which is not compared).
			if changed := labelChanges(g.Object.GetLabels(), live.GetLabels()); len(changed) > 0 {
				out = append(out, Drift{Manifest: g, Labels: changed})
			}
			continue
		}
		if !fields {
			continue
		}
		want, err := c.asServerMakesIt(ctx, ri, g.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fields := differing(g.Kind(), want.Object, live.Object); len(fields) > 0 {
			out = append(out, Drift{Manifest: g, Fields: fields})
		}
	}
	return out, errors.Join(errs...)
}

// differing are the compared fields of kind whose values differ. A ClusterRole that
// aggregates others has its rules filled in by a controller: its aggregationRule is compared.
func differing(kind string, want, live map[string]any) []string {
	var out []string
	for _, f := range compared(kind) {
		if f == "rules" && want["aggregationRule"] != nil {
			continue
		}
		if !reflect.DeepEqual(want[f], live[f]) {
			out = append(out, f)
		}
	}
	return out
}

// labelChanges compares a namespace's live labels with the revision's: each label the
// revision renders, and any Pod Security label it does not.
func labelChanges(want, live map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v, ok := live[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s removed (the revision has %s)", k, want[k]))
		case v != want[k]:
			out = append(out, fmt.Sprintf("%s=%s (the revision has %s)", k, v, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(live)) {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, podSecurityEnforce) {
			out = append(out, fmt.Sprintf("%s=%s added", k, live[k]))
		}
	}
	return out
}
