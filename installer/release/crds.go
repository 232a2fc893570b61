package release

import (
	"context"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// FieldManager is the server-side apply manager of what the installer writes itself.
const FieldManager = "polyaxon-deploy"

// CRDResult is what ApplyCRDs did.
type CRDResult struct {
	Applied  []string `json:"applied,omitempty"`
	Replaced []string `json:"replaced,omitempty"`
	// Warnings: CRDs that could not be brought to the chart's now, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// ApplyCRDs brings the cluster's CRDs to the chart's (crds/): Helm creates them on the first
// install and never updates them, so a fix to a CRD would never reach a cluster. Server-side
// apply updates them in place. A change the API server refuses in place (a CRD's kind is
// immutable: older charts spelt KfJob as KFJob) is made by deleting and creating the CRD, but
// only while it holds no object, since deleting a CRD deletes its objects, the runs; otherwise
// it is a warning, and the next upgrade tries again. Without a cluster connection (tests with
// fakes) it does nothing.
func (c *Client) ApplyCRDs(ctx context.Context, ch *chart.Chart) (CRDResult, error) {
	var res CRDResult
	if c.cfg.RESTClientGetter == nil || len(ch.CRDObjects()) == 0 {
		return res, nil
	}
	rc, err := c.cfg.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return res, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return res, err
	}
	crds := dyn.Resource(crdResource)
	for _, f := range ch.CRDObjects() {
		want := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(f.File.Data, &want.Object); err != nil {
			return res, fmt.Errorf("chart CRD %s: %w", f.Filename, err)
		}
		name := want.GetName()
		_, err := crds.Apply(ctx, name, want, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		switch {
		case err == nil:
			res.Applied = append(res.Applied, name)
			continue
		case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable"):
			return res, fmt.Errorf("updating CRD %s from the chart: %w", name, err)
		}
		replaced, why, err := replaceEmptyCRD(ctx, dyn, want)
		if err != nil {
			return res, err
		}
		if replaced {
			res.Replaced = append(res.Replaced, name)
		} else {
			res.Warnings = append(res.Warnings, why)
		}
	}
	c.progress("CRDs: %d up to date with the chart, %d replaced", len(res.Applied), len(res.Replaced))
	for _, w := range res.Warnings {
		c.progress("warning: %s", w)
	}
	return res, nil
}

// replaceEmptyCRD deletes and re-creates a CRD that holds no object.
func replaceEmptyCRD(ctx context.Context, dyn dynamic.Interface, want *unstructured.Unstructured) (bool, string, error) {
	name := want.GetName()
	group, _, _ := unstructured.NestedString(want.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(want.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(want.Object, "spec", "versions")
	kind, _, _ := unstructured.NestedString(want.Object, "spec", "names", "kind")
	for _, v := range versions {
		vname, _, _ := unstructured.NestedString(v.(map[string]any), "name")
		list, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: vname, Resource: plural}).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", fmt.Errorf("listing %s: %w", name, err)
		}
		if list != nil && len(list.Items) > 0 {
			return false, fmt.Sprintf("CRD %s cannot take the chart's definition in place (kind %s) and still holds %s objects (e.g. %s/%s): runs of that kind are not reconciled until it does; when none is left (kubectl get %s -A), upgrade again", name, kind, plural, list.Items[0].GetNamespace(), list.Items[0].GetName(), plural), nil
		}
	}
	crds := dyn.Resource(crdResource)
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return false, "", fmt.Errorf("replacing CRD %s: %w", name, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return false, "", fmt.Errorf("replacing CRD %s: the old one is not gone: %w", name, err)
	}
	if _, err := crds.Apply(ctx, name, want, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return false, "", fmt.Errorf("re-creating CRD %s: %w", name, err)
	}
	return true, "", nil
}
