package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// objectVerbs are what Helm does to release objects on install and upgrade.
var objectVerbs = []string{"get", "create", "update", "patch"}

// storageVerbs are what Helm does to its release records (Secrets) in the namespace.
var storageVerbs = []string{"get", "list", "create", "update"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type access struct {
	group, resource, namespace, verb string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.namespace != "" {
		return fmt.Sprintf("%s %s in namespace %s", a.verb, r, a.namespace)
	}
	return fmt.Sprintf("%s %s (cluster-wide)", a.verb, r)
}

// checkRBAC asks the API server (SelfSubjectAccessReview) for every verb Helm needs on every
// kind the release contains: objects, hooks, CRDs not yet installed, the namespace if missing,
// and Helm's release records.
func (e *Env) checkRBAC(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return "", err
	}
	nsExists, err := e.namespaceExists(ctx)
	if err != nil && !isForbiddenErr(err) {
		return "", err
	}

	want := map[access]bool{}
	add := func(group, resource, ns string, verbs ...string) {
		for _, v := range verbs {
			want[access{group, resource, ns, v}] = true
		}
	}
	var unmapped []string
	addObject := func(m render.Manifest) {
		gvk := m.GVK()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			unmapped = append(unmapped, fmt.Sprintf("%s %s: %v", gvk.Kind, m.Name(), err))
			return
		}
		ns := ""
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns = m.Object.GetNamespace()
			if ns == "" {
				ns = e.Namespace
			}
		}
		add(mapping.Resource.Group, mapping.Resource.Resource, ns, objectVerbs...)
	}
	for _, m := range e.manifests() {
		addObject(m)
	}
	if e.Rendered != nil && len(e.Rendered.CRDs) > 0 {
		missing, err := e.missingCRDs(ctx)
		if err != nil {
			return "", err
		}
		if len(missing) > 0 {
			add("apiextensions.k8s.io", "customresourcedefinitions", "", "create")
		}
	}
	if !nsExists {
		add("", "namespaces", "", "create")
	}
	add("", "secrets", e.Namespace, storageVerbs...)

	keys := make([]access, 0, len(want))
	for a := range want {
		keys = append(keys, a)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })

	var denied []string
	for _, a := range keys {
		review := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{Group: a.group, Resource: a.resource, Namespace: a.namespace, Verb: a.verb},
		}}
		res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("asking the API server whether you may %s: %w", a, err)
		}
		if !res.Status.Allowed {
			msg := "cannot " + a.String()
			if res.Status.Reason != "" {
				msg += " (" + res.Status.Reason + ")"
			}
			denied = append(denied, msg)
		}
	}
	if len(unmapped) > 0 {
		denied = append(denied, "unknown kinds (is an API missing from the cluster?): "+strings.Join(unmapped, "; "))
	}
	if len(denied) > 0 {
		return "", joinErrs(denied, 20)
	}
	return fmt.Sprintf("%d permissions allowed", len(keys)), nil
}

// missingCRDs returns the names of the chart's CRDs not present in the cluster.
func (e *Env) missingCRDs(ctx context.Context) ([]string, error) {
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, crd := range e.Rendered.CRDs {
		if _, err := crdClient(dyn).Get(ctx, crd.Name(), metav1.GetOptions{}); err != nil {
			if isNotFound(err) {
				missing = append(missing, crd.Name())
				continue
			}
			if isForbiddenErr(err) {
				// Reading CRDs is cluster-scoped; without it assume they must be created.
				missing = append(missing, crd.Name())
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", crd.Name(), err)
		}
	}
	return missing, nil
}

func crdClient(dyn dynamic.Interface) dynamic.ResourceInterface { return dyn.Resource(crdGVR) }
