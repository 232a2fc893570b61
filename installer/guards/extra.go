package guards

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	networkPolicies     = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	roleBindings        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	clusterRoleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

// Extra is an object beside the revision's guards, which the revision does not render, that
// widens what they allow.
type Extra struct {
	Kind, Namespace, Name string
	// Why it widens access: what it allows or binds.
	Why string
}

func (e Extra) String() string {
	n := e.Name
	if e.Namespace != "" {
		n = e.Namespace + "/" + n
	}
	return fmt.Sprintf("%s %s extra: %s", e.Kind, n, e.Why)
}

// Delete is the kubectl command that deletes it.
func (e Extra) Delete() string {
	if e.Namespace == "" {
		return fmt.Sprintf("kubectl delete %s %s", strings.ToLower(e.Kind), e.Name)
	}
	return fmt.Sprintf("kubectl -n %s delete %s %s", e.Namespace, strings.ToLower(e.Kind), e.Name)
}

// Extra finds what widens access beside the revision's guards: every NetworkPolicy in the
// release's or the runs' namespace that the revision does not render (NetworkPolicies add up:
// what one allows is allowed whatever the others say), and every RoleBinding in those
// namespaces, and ClusterRoleBinding, that the revision does not render and that binds a
// subject of the release: a ServiceAccount of the runs' namespace, one of the release's
// accounts, or a group they are in (system:serviceaccounts[:namespace], system:authenticated;
// system:unauthenticated, which a run's requests without a token are in). Kubernetes' own
// ClusterRoleBindings (labelled kubernetes.io/bootstrapping=rbac-defaults, each binding the
// system: ClusterRole of its name) give those groups discovery and are not counted.
func (c Client) Extra(ctx context.Context, rev Revision) ([]Extra, error) {
	rendered := map[string]bool{}
	for _, m := range rev.Objects {
		rendered[m.Kind()+" "+name(m.Object)] = true
	}
	var out []Extra
	var errs []error
	for _, ns := range rev.Namespaces {
		found, err := listExtra(ctx, c, networkPolicies, ns, "NetworkPolicy", rendered, func(np *networkingv1.NetworkPolicy) string {
			return allows(np)
		})
		out, errs = append(out, found...), append(errs, err)
		found, err = listExtra(ctx, c, roleBindings, ns, "RoleBinding", rendered, func(rb *rbacv1.RoleBinding) string {
			if madeForARun(rb.OwnerReferences) || rev.madeForTheDatabase(rb) {
				return ""
			}
			return rev.binds(rb.Namespace, rb.Subjects, rb.RoleRef)
		})
		out, errs = append(out, found...), append(errs, err)
	}
	found, err := listExtra(ctx, c, clusterRoleBindings, "", "ClusterRoleBinding", rendered, func(crb *rbacv1.ClusterRoleBinding) string {
		if kubernetesDefault(crb) {
			return ""
		}
		return rev.binds("", crb.Subjects, crb.RoleRef)
	})
	out, errs = append(out, found...), append(errs, err)
	return out, errors.Join(errs...)
}

// listExtra lists a kind in namespace ("" for a cluster-scoped one) and returns the objects
// the revision does not render for which why says how they widen access (empty: they do not).
func listExtra[T any](ctx context.Context, c Client, gvr schema.GroupVersionResource, namespace, kind string, rendered map[string]bool, why func(*T) string) ([]Extra, error) {
	list, err := c.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		where := ""
		if namespace != "" {
			where = " in " + namespace
		}
		return nil, fmt.Errorf("listing %ss%s: %w", kind, where, err)
	}
	var out []Extra
	for i := range list.Items {
		u := &list.Items[i]
		if rendered[kind+" "+name(u)] {
			continue
		}
		obj := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return out, fmt.Errorf("%s %s: %w", kind, name(u), err)
		}
		if w := why(obj); w != "" {
			out = append(out, Extra{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(), Why: w})
		}
	}
	return out, nil
}

// runOperators are the groups of the distributed backends whose controllers bind a run's own
// accounts in the runs' namespace (the MPI launcher's, KubeRay's autoscaler's), owned by the run.
var runOperators = []string{"kubeflow.org", "ray.io", "kubernetes.dask.org"}

// madeForARun: the binding's controller is a run's Kubeflow job or Ray or Dask cluster, which
// deletes it with the run; deleting it before would break the run.
func madeForARun(owners []metav1.OwnerReference) bool {
	for _, o := range owners {
		group, _, _ := strings.Cut(o.APIVersion, "/")
		if o.Controller != nil && *o.Controller && slices.Contains(runOperators, group) {
			return true
		}
	}
	return false
}

// cnpgGroup is CloudNativePG's API group.
const cnpgGroup = "postgresql.cnpg.io"

// madeForTheDatabase: the binding is the one CloudNativePG keeps for a Cluster of the revision,
// named after it, binding the Cluster's own account (its instances') to the Cluster's own Role,
// and controlled by it. Runs cannot use that account (the runs' admission policy names theirs).
func (rev Revision) madeForTheDatabase(rb *rbacv1.RoleBinding) bool {
	if !slices.Contains(rev.Databases, rb.Namespace+"/"+rb.Name) {
		return false
	}
	owner := metav1.GetControllerOfNoCopy(rb)
	if owner == nil || owner.Kind != "Cluster" || owner.Name != rb.Name || !strings.HasPrefix(owner.APIVersion, cnpgGroup+"/") {
		return false
	}
	own := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: rb.Name, Namespace: rb.Namespace}
	return rb.RoleRef.Kind == "Role" && rb.RoleRef.Name == rb.Name && len(rb.Subjects) == 1 && rb.Subjects[0] == own
}

// kubernetesDefault is one of the ClusterRoleBindings the API server itself keeps.
func kubernetesDefault(crb *rbacv1.ClusterRoleBinding) bool {
	return crb.Labels["kubernetes.io/bootstrapping"] == "rbac-defaults" && strings.HasPrefix(crb.Name, "system:") &&
		crb.RoleRef.Kind == "ClusterRole" && crb.RoleRef.Name == crb.Name
}

// binds says which subjects of the release a binding in namespace ("" for a
// ClusterRoleBinding) gives the role's rights; empty when it binds none.
func (rev Revision) binds(namespace string, subjects []rbacv1.Subject, role rbacv1.RoleRef) string {
	var who []string
	for _, s := range subjects {
		if w := rev.subject(namespace, s); w != "" {
			who = append(who, w)
		}
	}
	if len(who) == 0 {
		return ""
	}
	return fmt.Sprintf("binds %s to %s %s, which the revision does not", strings.Join(who, ", "), role.Kind, role.Name)
}

// subject describes s when it is, or holds, an account of the release.
func (rev Revision) subject(namespace string, s rbacv1.Subject) string {
	account := func(ns, n string) string {
		switch {
		case ns == rev.RunsNamespace:
			return fmt.Sprintf("ServiceAccount %s/%s (the runs' namespace)", ns, n)
		case slices.Contains(rev.Accounts, ns+"/"+n):
			return fmt.Sprintf("ServiceAccount %s/%s (the release's)", ns, n)
		}
		return ""
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		return account(ns, s.Name)
	case rbacv1.UserKind:
		if rest, ok := strings.CutPrefix(s.Name, "system:serviceaccount:"); ok {
			if ns, n, ok := strings.Cut(rest, ":"); ok {
				return account(ns, n)
			}
		}
	case rbacv1.GroupKind:
		switch s.Name {
		case "system:authenticated", "system:unauthenticated", "system:serviceaccounts":
			return "group " + s.Name
		}
		if ns, ok := strings.CutPrefix(s.Name, "system:serviceaccounts:"); ok && rev.holds(ns) {
			return "group " + s.Name
		}
	}
	return ""
}

// holds: the namespace has a ServiceAccount of the release, or is the runs'.
func (rev Revision) holds(namespace string) bool {
	if namespace == rev.RunsNamespace {
		return true
	}
	for _, a := range rev.Accounts {
		if strings.HasPrefix(a, namespace+"/") {
			return true
		}
	}
	return false
}

// allows says what a NetworkPolicy lets through, in a few words; empty when it lets nothing
// through (a deny-only policy narrows, whatever else there is).
func allows(np *networkingv1.NetworkPolicy) string {
	if len(np.Spec.Ingress) == 0 && len(np.Spec.Egress) == 0 {
		return ""
	}
	pods := "every pod"
	if sel := metav1.FormatLabelSelector(&np.Spec.PodSelector); sel != "<none>" && sel != "" {
		pods = "pods " + sel
	}
	types := np.Spec.PolicyTypes
	if len(types) == 0 {
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	var what []string
	if slices.Contains(types, networkingv1.PolicyTypeIngress) {
		what = append(what, ruleWords("ingress", len(np.Spec.Ingress), slices.ContainsFunc(np.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
			return len(r.From) == 0 && len(r.Ports) == 0
		})))
	}
	if slices.Contains(types, networkingv1.PolicyTypeEgress) {
		what = append(what, ruleWords("egress", len(np.Spec.Egress), slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
			return len(r.To) == 0 && len(r.Ports) == 0
		})))
	}
	return fmt.Sprintf("not rendered by the revision, and NetworkPolicies add up (what one allows is allowed): it selects %s and allows %s", pods, strings.Join(what, " and "))
}

func ruleWords(direction string, rules int, all bool) string {
	switch {
	case all:
		return "all " + direction
	case rules == 0:
		return "no " + direction
	case rules == 1:
		return direction + " by 1 rule"
	}
	return fmt.Sprintf("%s by %d rules", direction, rules)
}
