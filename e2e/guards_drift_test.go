package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestCheckSeesEveryGuard (issue 53, "`check` sees every guard"): after `install --profile
// production`, five ways to loosen what keeps runs apart, done at once (one install costs
// minutes): the runs' namespace loses its Pod Security enforce label, the gateway's
// NetworkPolicy is deleted, the agent's Role gets every verb on Secrets, an allow-all
// NetworkPolicy and a RoleBinding of the runs' account to `edit` are added in the runs'
// namespace. `check` fails run-guards naming each; `recover` puts back the revision's three
// and names the two extra objects it leaves; once they are deleted, `check` passes.
func TestCheckSeesEveryGuard(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := runsCluster(t, "guards")
	ns, runs := nsInstall, nsRuns
	c.deploy(t, "install", "--profile", "production", "--set", "metrics.enabled=true", "--set", "metrics.installer.enabled=true",
		"-o", "json").requireExit(t, 0)
	cs := c.Clientset
	ctx := ctxT(t, 10*time.Minute)
	// polyaxon-deploy's exporter, with the rights the chart gives its ServiceAccount and no more.
	exporter := startDeployExporter(t, c, "--as", "system:serviceaccount:"+ns+":"+releaseName+"-installer-exporter")
	guardsAre(t, exporter, "the exporter right after the install: every guard there, nothing beside them", nil, nil)

	res := c.deploy(t, "check", "-o", "json").result(t)
	require.NotContains(t, failedChecks(res), "run-guards", checkDetail(res, "run-guards"))
	t.Logf("check right after the install: %s", checkDetail(res, "run-guards"))
	runsAccount := releaseName + "-runs"
	require.False(t, readsSecrets(t, cs, runs, runsAccount), "the runs' account reads no Secret")

	// (1) the runs' namespace enforces nothing.
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, runs, metav1.GetOptions{})
	require.NoError(t, err)
	delete(nsObj.Labels, "pod-security.kubernetes.io/enforce")
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	// (2) a platform NetworkPolicy deleted: the gateway's.
	gateway := releaseName + "-gateway"
	require.NoError(t, cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, gateway, metav1.DeleteOptions{}))
	// (3) the agent's Role widened to every verb on Secrets.
	agent := releaseName + "-agent"
	role, err := cs.RbacV1().Roles(runs).Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	rendered := role.Rules
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
	_, err = cs.RbacV1().Roles(runs).Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	// (4) an allow-all NetworkPolicy beside the runs' own.
	_, err = cs.NetworkingV1().NetworkPolicies(runs).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-all", Namespace: runs},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}}, Egress: []networkingv1.NetworkPolicyEgressRule{{}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// (5) the runs' account bound to edit in its namespace.
	_, err = cs.RbacV1().RoleBindings(runs).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "runs-edit", Namespace: runs},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: runsAccount, Namespace: runs}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The API server's authorizer sees a new binding through its informers, and `edit` gets its
	// rules from the controller manager's aggregation: both lag on a loaded machine (CI once
	// asked too early).
	require.Eventually(t, func() bool { return readsSecrets(t, cs, runs, runsAccount) }, time.Minute, time.Second,
		"bound to edit, the runs' account reads the Secrets of its namespace")

	allowAll := "NetworkPolicy " + runs + "/allow-all extra: not rendered by the revision, and NetworkPolicies add up (what one allows is allowed): " +
		"it selects every pod and allows all ingress and all egress"
	runsEdit := "RoleBinding " + runs + "/runs-edit extra: binds ServiceAccount " + runs + "/" + runsAccount +
		" (the runs' namespace) to ClusterRole edit, which the revision does not"
	restored := []string{
		"Namespace " + runs + " labels changed: pod-security.kubernetes.io/enforce removed (the revision has restricted)",
		"NetworkPolicy " + ns + "/" + gateway + " missing",
		"Role " + runs + "/" + agent + " changed (rules)",
	}
	// The exporter reads, it never dry-runs: it sees what is gone or loosened (the labels, the
	// NetworkPolicy) and what widens, not a Role's changed rules (check's).
	guardsAre(t, exporter, "the exporter after the five changes",
		[]string{"Namespace//" + runs, "NetworkPolicy/" + ns + "/" + gateway},
		[]string{"NetworkPolicy/" + runs + "/allow-all", "RoleBinding/" + runs + "/runs-edit"})

	res = c.deploy(t, "check", "-o", "json").result(t)
	detail := checkDetail(res, "run-guards")
	t.Logf("check after the five changes: %s", detail)
	assert.Contains(t, failedChecks(res), "run-guards")
	for _, want := range append(restored, allowAll, runsEdit, "`polyaxon-deploy recover` puts them back",
		"kubectl -n "+runs+" delete networkpolicy allow-all", "kubectl -n "+runs+" delete rolebinding runs-edit") {
		assert.Contains(t, detail, want)
	}

	out := c.deploy(t, "recover", "--yes").requireExit(t, 0)
	t.Logf("recover --yes:\n%s", out.Stderr)
	assert.Contains(t, out.Stderr, "run guards put back as the deployed revision has them")
	for _, want := range append(restored, "left in place, as recover deletes nothing", allowAll, runsEdit) {
		assert.Contains(t, out.Stderr, want)
	}
	nsObj, err = cs.CoreV1().Namespaces().Get(ctx, runs, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"])
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, gateway, metav1.GetOptions{})
	assert.NoError(t, err, "the gateway's NetworkPolicy is back")
	role, err = cs.RbacV1().Roles(runs).Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, rendered, role.Rules, "the agent's Role has the revision's rules again")

	guardsAre(t, exporter, "the exporter after recover", nil,
		[]string{"NetworkPolicy/" + runs + "/allow-all", "RoleBinding/" + runs + "/runs-edit"})

	res = c.deploy(t, "check", "-o", "json").result(t)
	detail = checkDetail(res, "run-guards")
	t.Logf("check after recover: %s", detail)
	assert.Contains(t, failedChecks(res), "run-guards", "the extra objects are still there")
	assert.Contains(t, detail, allowAll)
	assert.Contains(t, detail, runsEdit)
	for _, r := range restored {
		assert.NotContains(t, detail, r)
	}

	require.NoError(t, cs.NetworkingV1().NetworkPolicies(runs).Delete(ctx, "allow-all", metav1.DeleteOptions{}))
	require.NoError(t, cs.RbacV1().RoleBindings(runs).Delete(ctx, "runs-edit", metav1.DeleteOptions{}))
	res = c.deploy(t, "check", "-o", "json").result(t)
	detail = checkDetail(res, "run-guards")
	t.Logf("check once the extra objects are deleted: %s", detail)
	assert.NotContains(t, failedChecks(res), "run-guards", detail)
	guardsAre(t, exporter, "the exporter once the extra objects are deleted", nil, nil)
	assert.Contains(t, detail, "guards as revision 1 has them, and no NetworkPolicy or binding beside them that widens access")
	assert.False(t, readsSecrets(t, cs, runs, runsAccount), "the runs' account reads no Secret again")
}

// readsSecrets asks the API server whether the account may read Secrets in its namespace.
func readsSecrets(t *testing.T, cs kubernetes.Interface, ns, account string) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + account,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// startDeployExporter runs `polyaxon-deploy exporter` on the cluster with args, on a loopback port,
// and returns its metrics URL once it serves.
func startDeployExporter(t *testing.T, c *testCluster, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	p := c.startDeploy(t, append([]string{"exporter", "-n", nsInstall, "--listen", addr}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exporter's log:\n%s", lastLines(p.stderr.String(), 30))
		}
	})
	return "http://" + addr + "/metrics"
}

// guardsAre waits until the exporter at url reads every guard, says the ones in missing (each
// "kind/namespace/name") are gone and every other is there, and names exactly extra as
// objects beside them that widen access.
func guardsAre(t *testing.T, url, what string, missing, extra []string) {
	t.Helper()
	key := func(m *dto.Metric) string {
		return labelOf(m, "guard_kind") + "/" + labelOf(m, "guard_namespace") + "/" + labelOf(m, "guard_name")
	}
	var last string
	f := scrapeWhen(t, url, what, func(f map[string]*dto.MetricFamily) bool {
		var gone, wider []string
		ok := f["polyaxon_deploy_guard_ok"]
		for _, m := range ok.GetMetric() {
			if m.GetGauge().GetValue() == 0 {
				gone = append(gone, key(m))
			}
		}
		for _, m := range f["polyaxon_deploy_guard_extra"].GetMetric() {
			wider = append(wider, key(m))
		}
		last = fmt.Sprintf("%d guards, gone %v, extra %v", len(ok.GetMetric()), gone, wider)
		return gaugeIs(f, "polyaxon_deploy_guards_up", 1) && gaugeIs(f, "polyaxon_deploy_facts_up", 1) &&
			len(ok.GetMetric()) >= 20 && sameSet(gone, missing) && sameSet(wider, extra)
	})
	t.Logf("%s: %s, revision %v", what, last, f["polyaxon_deploy_guards_revision"].GetMetric()[0].GetGauge().GetValue())
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
