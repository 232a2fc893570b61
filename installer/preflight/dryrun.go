package preflight

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func isForbiddenErr(err error) bool { return apierrors.IsForbidden(err) }

// standInNamespace receives namespaced dry-runs while the release namespace does not exist
// yet: the API server refuses any object in a missing namespace, even in a dry-run.
const standInNamespace = "default"

// checkDryRun submits every object with server-side apply and dryRun=All: apply creates what is
// missing and patches what exists, so one request per object validates both install and
// upgrade, through the same admission chain (webhooks and policies included).
func (e *Env) checkDryRun(ctx context.Context) (string, error) {
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return "", err
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return "", err
	}
	nsExists, err := e.namespaceExists(ctx)
	if err != nil {
		return "", err
	}
	var objs []render.Manifest
	if e.Rendered != nil {
		// CRDs from crds/ are created only when absent (Helm never updates them).
		missing, err := e.missingCRDs(ctx)
		if err != nil {
			return "", err
		}
		isMissing := map[string]bool{}
		for _, n := range missing {
			isMissing[n] = true
		}
		for _, c := range e.Rendered.CRDs {
			if isMissing[c.Name()] {
				objs = append(objs, c)
			}
		}
	}
	objs = append(objs, e.manifests()...)
	if len(objs) == 0 {
		return "", check.Skip("nothing rendered")
	}
	pendingCRDs := map[string]bool{}
	for _, c := range objs {
		if c.Kind() == "CustomResourceDefinition" {
			group, _, _ := unstructured.NestedString(c.Object.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(c.Object.Object, "spec", "names", "kind")
			pendingCRDs[group+"/"+kind] = true
		}
	}

	var failures []string
	var notes []string
	n := 0
	// Namespaces that do not exist yet take their objects' dry-runs in the stand-in: the
	// release's own, and those the release creates (the runs' namespace).
	unborn := map[string]bool{e.Namespace: !nsExists}
	for _, m := range objs {
		if m.Kind() != "Namespace" || m.Name() == e.Namespace {
			continue
		}
		if _, err := dyn.Resource(nsGVR).Get(ctx, m.Name(), metav1.GetOptions{}); isNotFound(err) {
			unborn[m.Name()] = true
		} else if err != nil {
			return "", fmt.Errorf("reading namespace %s: %w", m.Name(), err)
		}
	}
	if !nsExists {
		nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": e.Namespace}}}
		if _, err := dyn.Resource(nsGVR).Apply(ctx, e.Namespace, nsObj, metav1.ApplyOptions{FieldManager: e.FieldManager, DryRun: []string{metav1.DryRunAll}, Force: true}); err != nil {
			failures = append(failures, fmt.Sprintf("Namespace %s: %v", e.Namespace, err))
		}
		notes = append(notes, fmt.Sprintf("namespace %s does not exist yet: namespaced objects were validated in %q", e.Namespace, standInNamespace))
	}
	for _, m := range objs {
		gvk := m.GVK()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			if pendingCRDs[gvk.Group+"/"+gvk.Kind] {
				notes = append(notes, fmt.Sprintf("%s %s not validated: its CRD is installed with the release", gvk.Kind, m.Name()))
				continue
			}
			failures = append(failures, fmt.Sprintf("%s %s: kind not served by the cluster: %v", gvk.Kind, m.Name(), err))
			continue
		}
		obj := m.Object.DeepCopy()
		var ri interface {
			Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = e.Namespace
			}
			if unborn[ns] {
				ns = standInNamespace
			}
			obj.SetNamespace(ns)
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		} else {
			ri = dyn.Resource(mapping.Resource)
		}
		if e.Recreated[gvk.Kind+"/"+obj.GetName()] {
			// Applied under its own name it would be a patch of the object the upgrade replaces.
			obj.SetName(recreatedStandIn(obj.GetName()))
			notes = append(notes, fmt.Sprintf("%s %s validated as a new object (the upgrade recreates it)", gvk.Kind, m.Name()))
		}
		// Apply rejects managedFields and a resourceVersion in the body; rendered objects have neither.
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: e.FieldManager, DryRun: []string{metav1.DryRunAll}, Force: true})
		n++
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s %s (%s): %v", gvk.Kind, m.Name(), m.Template, err))
		}
	}
	if len(failures) > 0 {
		return "", joinErrs(failures, 20)
	}
	detail := fmt.Sprintf("%d objects accepted", n)
	for _, note := range notes {
		detail += "; " + note
	}
	return detail, nil
}

// recreatedStandIn is the name a recreated object is validated under: one no object has, within
// the 52 characters a StatefulSet's name may have.
func recreatedStandIn(name string) string {
	const suffix = "-dry-run-new"
	if len(name)+len(suffix) > 52 {
		name = name[:52-len(suffix)]
	}
	return name + suffix
}
