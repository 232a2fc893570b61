package guards_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Extra names each object beside the guards that widens access, with what it allows or binds,
// and leaves alone the bindings of subjects that are not the release's. Restore, which puts
// the revision's guards back, does not count them as drift.
func TestExtraNamesWhatWidensAccess(t *testing.T) {
	ns, runs := "extra", "extra-runs"
	rev, g, c := install(t, ns)
	ctx := context.Background()
	cs := c.Clientset
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

	_, err := cs.NetworkingV1().NetworkPolicies(runs).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: meta(runs, "allow-all"),
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}}, Egress: []networkingv1.NetworkPolicyEgressRule{{}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: meta(ns, "metrics"),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "api"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// A deny-only policy narrows whatever else there is: no extra.
	_, err = cs.NetworkingV1().NetworkPolicies(runs).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: meta(runs, "deny-egress"),
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	edit := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
	view := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	bindings := []*rbacv1.RoleBinding{
		// The runs' account given edit in its namespace: reported.
		{ObjectMeta: meta(runs, "runs-edit"), RoleRef: edit, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "polyaxon-runs", Namespace: runs}}},
		// A person's binding: none of the release's business.
		{ObjectMeta: meta(runs, "alice-view"), RoleRef: view, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}}},
		// The account the platform's pods run as when they name none (no namespace: the binding's).
		{ObjectMeta: meta(ns, "platform-view"), RoleRef: view, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}},
		// The MPI launcher's binding, made and owned by a run's MPIJob: the run's own.
		{ObjectMeta: metav1.ObjectMeta{Namespace: runs, Name: "mpi-launcher", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "plx-operation-x", UID: "u", Controller: ptr(true)}}},
			RoleRef: view, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "plx-operation-x-launcher", Namespace: runs}}},
	}
	for _, b := range bindings {
		_, err := cs.RbacV1().RoleBindings(b.Namespace).Create(ctx, b, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	clusterBindings := []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: meta("", "extra-runs-view"), RoleRef: view, Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + runs}}},
		{ObjectMeta: meta("", "extra-agent-edit"), RoleRef: edit, Subjects: []rbacv1.Subject{
			{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"},
			{Kind: "User", APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:" + ns + ":polyaxon-agent"}}},
		{ObjectMeta: meta("", "extra-kube-system"), RoleRef: view, Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:kube-system"}}},
	}
	for _, b := range clusterBindings {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}

	extras, err := g.Extra(ctx, rev)
	require.NoError(t, err)
	const addUp = "not rendered by the revision, and NetworkPolicies add up (what one allows is allowed): "
	assert.ElementsMatch(t, []string{
		"NetworkPolicy " + runs + "/allow-all extra: " + addUp + "it selects every pod and allows all ingress and all egress",
		"NetworkPolicy " + ns + "/metrics extra: " + addUp + "it selects pods app.kubernetes.io/component=api and allows ingress by 1 rule",
		"RoleBinding " + runs + "/runs-edit extra: binds ServiceAccount " + runs + "/polyaxon-runs (the runs' namespace) to ClusterRole edit, which the revision does not",
		"RoleBinding " + ns + "/platform-view extra: binds ServiceAccount " + ns + "/default (the release's) to ClusterRole view, which the revision does not",
		"ClusterRoleBinding extra-runs-view extra: binds group system:serviceaccounts:" + runs + " to ClusterRole view, which the revision does not",
		"ClusterRoleBinding extra-agent-edit extra: binds ServiceAccount " + ns + "/polyaxon-agent (the release's) to ClusterRole edit, which the revision does not",
	}, texts(extras))
	for _, x := range extras {
		if x.Name == "allow-all" {
			assert.Equal(t, "kubectl -n "+runs+" delete networkpolicy allow-all", x.Delete())
		}
		if x.Name == "extra-runs-view" {
			assert.Equal(t, "kubectl delete clusterrolebinding extra-runs-view", x.Delete())
		}
	}

	drifts, err := g.Compare(ctx, rev.Objects)
	require.NoError(t, err)
	assert.Empty(t, texts(drifts), "extra objects are no drift of the revision's guards")
}

func ptr[T any](v T) *T { return &v }
