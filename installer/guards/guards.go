// Package guards keeps the objects that keep runs apart from the platform as a revision of the
// release has them: the run admission policies and their bindings, every NetworkPolicy the
// revision renders (the runs' and the platform's own), its Roles, RoleBindings, ClusterRoles
// and ClusterRoleBindings, the runs' ResourceQuota and LimitRange, and the Pod Security labels
// of the runs' namespace. The API server says nothing when one of them is deleted or changed (a
// deleted policy binding simply stops refusing), nor when an object beside them widens what
// they allow (a NetworkPolicy that allows all, a RoleBinding that gives the runs' account a
// role). So `check` compares them with the deployed revision and looks for such objects, and
// `recover` puts the revision's back (it deletes nothing).
package guards

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// kinds are the guards' kinds, each compared on the fields compared (below). A Namespace
// guards through its labels only.
var kinds = []string{
	"Namespace",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
	"NetworkPolicy", "ResourceQuota", "LimitRange",
	"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
}

// Revision is what a revision of the release guards with, and where objects beside its own
// would widen what they allow.
type Revision struct {
	// Objects are the guards the revision renders, each with its namespace (the release's
	// when its manifest names none).
	Objects []render.Manifest
	// Namespaces are the release's and the runs' namespaces (one when runs stay with the
	// platform): a NetworkPolicy or RoleBinding in them that the revision does not render is
	// looked at by Client.Extra.
	Namespaces []string
	// RunsNamespace is where the revision sends runs: every ServiceAccount in it is a run's.
	RunsNamespace string
	// Accounts are the release's ServiceAccounts, "namespace/name": those it renders and those
	// its pods run as ("default" when a pod names none).
	Accounts []string
	// Databases are the CloudNativePG Clusters the revision renders, "namespace/name": the
	// operator binds each one's own account to its own Role (madeForTheDatabase).
	Databases []string
}

// Of returns the guards of a revision of the release in namespace.
func Of(r *render.Result, namespace string) Revision {
	rev := Revision{RunsNamespace: plan.RunsNamespace(r.Objects(), namespace)}
	rev.Namespaces = []string{namespace}
	if rev.RunsNamespace != namespace {
		rev.Namespaces = append(rev.Namespaces, rev.RunsNamespace)
	}
	accounts := map[string]bool{}
	for _, m := range append(slices.Clone(r.Manifests), r.Hooks...) {
		ns := m.Object.GetNamespace()
		if ns == "" {
			ns = namespace
		}
		if sa, ok := podAccount(m.Object); ok {
			accounts[ns+"/"+sa] = true
		}
		if m.Kind() == "ServiceAccount" {
			accounts[ns+"/"+m.Name()] = true
		}
		if m.Kind() == "Cluster" && m.Object.GroupVersionKind().Group == cnpgGroup {
			rev.Databases = append(rev.Databases, ns+"/"+m.Name())
		}
		if m.IsHook() || !slices.Contains(kinds, m.Kind()) {
			continue
		}
		if namespaced(m.Kind()) && m.Object.GetNamespace() == "" {
			m.Object = m.Object.DeepCopy()
			m.Object.SetNamespace(namespace)
		}
		rev.Objects = append(rev.Objects, m)
	}
	for a := range accounts {
		rev.Accounts = append(rev.Accounts, a)
	}
	slices.Sort(rev.Accounts)
	return rev
}

// namespaced are the guards' kinds that live in a namespace.
func namespaced(kind string) bool {
	switch kind {
	case "NetworkPolicy", "ResourceQuota", "LimitRange", "Role", "RoleBinding":
		return true
	}
	return false
}

// podAccount is the ServiceAccount the pods of a workload run as.
func podAccount(o *unstructured.Unstructured) (string, bool) {
	var path []string
	switch o.GetKind() {
	case "Pod":
		path = []string{"spec"}
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		path = []string{"spec", "template", "spec"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return "", false
	}
	sa, _, _ := unstructured.NestedString(o.Object, append(path, "serviceAccountName")...)
	if sa == "" {
		sa = "default"
	}
	return sa, true
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
