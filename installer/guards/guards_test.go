package guards_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
)

// Of takes every object of a revision that keeps runs apart: the runs' namespace (its labels),
// every NetworkPolicy of both namespaces, the platform's own too, every Role and RoleBinding,
// the admission policies and their bindings, the quota and the LimitRange; and the accounts
// of the release, including those its pods run as without naming one.
func TestOfTakesEveryGuardOfTheRevision(t *testing.T) {
	rev := guards.Of(production(t, "polyaxon"), "polyaxon")
	var names []string
	for _, m := range rev.Objects {
		names = append(names, m.Kind()+" "+m.Object.GetNamespace()+"/"+m.Name())
	}
	for _, want := range []string{
		"Namespace /polyaxon-runs",
		"NetworkPolicy polyaxon/polyaxon-gateway", "NetworkPolicy polyaxon/polyaxon-default-deny",
		"NetworkPolicy polyaxon/polyaxon-platform-egress", "NetworkPolicy polyaxon/polyaxon-postgresql",
		"NetworkPolicy polyaxon/polyaxon-redis",
		"NetworkPolicy polyaxon-runs/polyaxon-runs", "NetworkPolicy polyaxon-runs/polyaxon-runs-distributed",
		"Role polyaxon-runs/polyaxon-agent", "Role polyaxon-runs/polyaxon-runs",
		"RoleBinding polyaxon-runs/polyaxon-gateway", "RoleBinding polyaxon-runs/polyaxon-operator",
		"ResourceQuota polyaxon-runs/polyaxon-runs", "LimitRange polyaxon-runs/polyaxon-runs",
		"ValidatingAdmissionPolicy /polyaxon-polyaxon-runs-restrictions",
		"ValidatingAdmissionPolicyBinding /polyaxon-polyaxon-runs-objects",
		"MutatingAdmissionPolicy /polyaxon-polyaxon-runs-security",
		"MutatingAdmissionPolicyBinding /polyaxon-polyaxon-runs-jobs",
		"MutatingAdmissionPolicy /polyaxon-polyaxon-runs-sidecar", "MutatingAdmissionPolicyBinding /polyaxon-polyaxon-runs-sidecar",
	} {
		assert.Contains(t, names, want)
	}
	assert.Len(t, names, 36, "%q", names)
	assert.Equal(t, []string{"polyaxon", "polyaxon-runs"}, rev.Namespaces)
	assert.Equal(t, "polyaxon-runs", rev.RunsNamespace)
	for _, a := range []string{"polyaxon/polyaxon-agent", "polyaxon/polyaxon-gateway", "polyaxon/polyaxon-operator", "polyaxon/default", "polyaxon-runs/polyaxon-runs"} {
		assert.Contains(t, rev.Accounts, a)
	}
}

// Each way a guard stops guarding is named, and Restore puts the revision's back: a label of
// the runs' namespace removed, changed or added (an enforce-version pinned to an old release),
// a platform NetworkPolicy deleted, a Role widened, a RoleBinding given another subject or
// another role, the quota raised, a policy binding deleted.
func TestCompareNamesEachChangeAndRestorePutsItBack(t *testing.T) {
	ns, runs := "drift", "drift-runs"
	rev, g, c := install(t, ns)
	ctx := context.Background()
	drifts, err := g.Compare(ctx, rev.Objects)
	require.NoError(t, err)
	assert.Empty(t, drifts, "right after the install")
	extras, err := g.Extra(ctx, rev)
	require.NoError(t, err)
	assert.Empty(t, extras, "nothing beside the guards (Kubernetes' own ClusterRoleBindings are not counted)")

	cs := c.Clientset
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, runs, metav1.GetOptions{})
	require.NoError(t, err)
	delete(nsObj.Labels, "pod-security.kubernetes.io/enforce")
	nsObj.Labels["pod-security.kubernetes.io/audit"] = "privileged"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "v1.20"
	nsObj.Labels["team"] = "ml" // a label the chart does not render: none of the guards' business
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "polyaxon-gateway", metav1.DeleteOptions{}))
	role, err := cs.RbacV1().Roles(runs).Get(ctx, "polyaxon-agent", metav1.GetOptions{})
	require.NoError(t, err)
	renderedRules := role.Rules
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
	_, err = cs.RbacV1().Roles(runs).Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	rb, err := cs.RbacV1().RoleBindings(runs).Get(ctx, "polyaxon-runs", metav1.GetOptions{})
	require.NoError(t, err)
	rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "default", Namespace: runs})
	_, err = cs.RbacV1().RoleBindings(runs).Update(ctx, rb, metav1.UpdateOptions{})
	require.NoError(t, err)
	// roleRef never changes in place: deleted and created again with another role.
	op, err := cs.RbacV1().RoleBindings(runs).Get(ctx, "polyaxon-operator", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.RbacV1().RoleBindings(runs).Delete(ctx, op.Name, metav1.DeleteOptions{}))
	op.ResourceVersion, op.RoleRef = "", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
	_, err = cs.RbacV1().RoleBindings(runs).Create(ctx, op, metav1.CreateOptions{})
	require.NoError(t, err)
	quota, err := cs.CoreV1().ResourceQuotas(runs).Get(ctx, "polyaxon-runs", metav1.GetOptions{})
	require.NoError(t, err)
	quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("100000")
	_, err = cs.CoreV1().ResourceQuotas(runs).Update(ctx, quota, metav1.UpdateOptions{})
	require.NoError(t, err)
	restrictions := ns + "-polyaxon-runs-restrictions"
	require.NoError(t, cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, restrictions, metav1.DeleteOptions{}))

	drifts, err = g.Compare(ctx, rev.Objects)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"Namespace " + runs + " labels changed: pod-security.kubernetes.io/audit=privileged (the revision has restricted), " +
			"pod-security.kubernetes.io/enforce removed (the revision has restricted), pod-security.kubernetes.io/enforce-version=v1.20 added",
		"NetworkPolicy " + ns + "/polyaxon-gateway missing",
		"Role " + runs + "/polyaxon-agent changed (rules)",
		"RoleBinding " + runs + "/polyaxon-runs changed (subjects)",
		"RoleBinding " + runs + "/polyaxon-operator changed (roleRef)",
		"ResourceQuota " + runs + "/polyaxon-runs changed (spec)",
		"ValidatingAdmissionPolicyBinding " + restrictions + " missing",
	}, texts(drifts))

	require.NoError(t, g.Restore(ctx, drifts, "polyaxon", ns))
	drifts, err = g.Compare(ctx, rev.Objects)
	require.NoError(t, err)
	assert.Empty(t, texts(drifts), "after Restore")
	nsObj, err = cs.CoreV1().Namespaces().Get(ctx, runs, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/audit"])
	assert.NotContains(t, nsObj.Labels, "pod-security.kubernetes.io/enforce-version")
	assert.Equal(t, "ml", nsObj.Labels["team"], "a label the revision does not render is left")
	role, err = cs.RbacV1().Roles(runs).Get(ctx, "polyaxon-agent", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, renderedRules, role.Rules)
	op, err = cs.RbacV1().RoleBindings(runs).Get(ctx, "polyaxon-operator", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Role", op.RoleRef.Kind)
	assert.Equal(t, "polyaxon", op.Annotations["meta.helm.sh/release-name"], "owned by the release as Helm owns it")
}

func texts[T interface{ String() string }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
