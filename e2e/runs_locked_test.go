package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// TestRunsLocked (issue 24, "runs are runs" and "runs never share the core pool in
// production"): after `install --profile production`, the API server refuses, with the
// reason, every run pod in the runs' namespace (polyaxon-runs) that names another service account than the runs one, a nodeName, a
// priority class, another scheduler, or the core pool's nodes (by nodeSelector or required
// node affinity), or that does not keep off them by the pool label (a core node's hostname, a
// label only core nodes carry). Each refusal is the one `plan` and `check` predict offline
// (installer/admission over the policies `render` prints). A run pod of each category as
// Polyaxon sends it is still admitted and placed on its pool, and so is one pinned to a node
// of its pool.
func TestRunsLocked(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := runsCluster(t, "locked")
	ns, runs := nsInstall, nsRuns
	c.deploy(t, "install", "--profile", "production", "-o", "json").requireExit(t, 0)
	cs, _ := warnedClient(t, c)
	pools := nodePools(t, c.Clientset)
	ev := offlineAdmitter(t, ns)
	policy := ns + "-" + releaseName + "-runs-restrictions"
	denied := "ValidatingAdmissionPolicy '" + policy + "' with binding '" + policy + "' denied request: "

	var coreNode, gpuNode string
	for node, pool := range pools {
		switch pool {
		case cluster.PoolCore:
			coreNode = node
		case cluster.PoolExperiments:
			gpuNode = node
		}
	}
	require.NotEmpty(t, coreNode, "the production cluster has a core pool")
	require.NotEmpty(t, gpuNode, "the production cluster has an experiments pool")
	const protectedPools = "core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core)"
	keepOff := "spec.nodeSelector/spec.affinity: a run pod must keep off the nodes of the protected categories " + protectedPools +
		" by their labels, and a hostname, another label or no nodeSelector may land it there: name a run pool in the run's environment.nodeSelector" +
		" (polyaxon=experiments or polyaxon=builds); a run that names none gets its category's (chart values nodeSelectors.<category>, runs.protectedCategories)"

	t.Run("no account of the release has a right in the platform's namespace; the runs' reads no Secret", func(t *testing.T) {
		for _, sa := range []string{"agent", "operator", "gateway", "runs"} {
			account := releaseName + "-" + sa
			saNS := ns
			if sa == "runs" {
				saNS = runs
			}
			for _, where := range []string{ns, runs} {
				rights := rightsOf(t, c, saNS, account, where)
				t.Logf("kubectl auth can-i --list --as system:serviceaccount:%s:%s -n %s:\n  %s", saNS, account, where, strings.Join(rights, "\n  "))
				if where == ns {
					assert.Emptyf(t, rights, "%s has rights in the platform's namespace %s", account, ns)
				}
				if sa == "runs" {
					for _, r := range rights {
						assert.NotContainsf(t, r, "secrets", "the runs' account reads Secrets in %s: %s", where, r)
					}
				}
			}
		}
	})

	t.Run("every escape is refused by the API server with the reason, as predicted", func(t *testing.T) {
		refusals := []struct {
			name    string
			change  func(*corev1.Pod)
			message string
		}{
			// The agent's account is not in the runs' namespace (below); its default account is.
			{"another service account of the runs' namespace", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" },
				"spec.serviceAccountName: a run pod uses the runs ServiceAccount " + releaseName + "-runs, not default: remove serviceAccountName from the run's environment"},
			{"a core node by nodeName", func(p *corev1.Pod) { p.Spec.NodeName = coreNode },
				"spec.nodeName: a run pod may not pick its node (" + coreNode + "): remove nodeName from the run's environment; the scheduler places it on its category's nodes"},
			{"a priority class", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" },
				"spec.priorityClassName: system-cluster-critical is not allowed for runs (allowed: none): remove priorityClassName from the run's environment, or add it to the chart value runs.allowedPriorityClasses"},
			{"another scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" },
				"spec.schedulerName: my-scheduler is not allowed for runs (allowed: default-scheduler): remove schedulerName from the run's environment, or add it to the chart value runs.allowedSchedulers"},
			{"the core pool by nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{cluster.PoolLabel: cluster.PoolCore} },
				"spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core): remove that nodeSelector or node affinity from the run's environment (runs.protectedCategories)"},
			{"the core pool by required node affinity", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: cluster.PoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{cluster.PoolCore}}}}}}}}
			}, "spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core): remove that nodeSelector or node affinity from the run's environment (runs.protectedCategories)"},
			// Without the pool label a selector may still be a core node's: refused too.
			{"a core node by its hostname", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: coreNode} }, keepOff},
			{"a label only core nodes carry", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: "kwok-" + cluster.PoolCore}
			}, keepOff},
		}
		for _, r := range refusals {
			sent := loadRunPod(t, "job.yaml", runs)
			r.change(sent)
			_, predicted := ev.AdmitPod(context.Background(), sent)
			require.Error(t, predicted, "%s: plan and check predict a refusal", r.name)
			assert.True(t, admission.IsRefusal(predicted), "%s: %v", r.name, predicted)
			_, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), sent, metav1.CreateOptions{})
			require.Error(t, err, "%s: the API server refuses the pod", r.name)
			assert.Contains(t, err.Error(), denied+r.message, r.name)
			// The server names the pod it generated; the refusal is the one predicted offline.
			assert.Equal(t, afterForbidden(predicted.Error()), afterForbidden(err.Error()), r.name)
		}

		// The agent's account lives with the platform: in the runs' namespace there is none to
		// take. The API server refuses the pod before any policy (the restrictions would too).
		sent := loadRunPod(t, "job.yaml", runs)
		sent.Spec.ServiceAccountName = releaseName + "-agent"
		_, predicted := ev.AdmitPod(context.Background(), sent)
		assert.True(t, admission.IsRefusal(predicted), "the restrictions refuse the agent's account: %v", predicted)
		_, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), sent, metav1.CreateOptions{})
		require.Error(t, err, "the agent's service account: the API server refuses the pod")
		assert.Contains(t, err.Error(), `serviceaccount "`+releaseName+`-agent" not found`)
	})

	t.Run("a run pod of each category is still admitted and placed", func(t *testing.T) {
		for _, f := range runPodFixtures {
			sent := loadRunPod(t, f.File, runs)
			_, err := ev.AdmitPod(context.Background(), sent)
			require.NoError(t, err, "%s: predicted admitted", f.File)
			created, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), sent, metav1.CreateOptions{})
			require.NoError(t, err, "%s is admitted", f.File)
			bound := waitBound(t, cs, runs, created.Name)
			assert.Equalf(t, f.Pool, pools[bound.Spec.NodeName], "%s (%s) runs on %s", f.File, f.Category, bound.Spec.NodeName)
		}
		// A run may still pick a node of a run pool, naming the pool too.
		pinned := loadRunPod(t, "experiment.yaml", runs)
		pinned.Spec.NodeSelector = map[string]string{cluster.PoolLabel: cluster.PoolExperiments, corev1.LabelHostname: gpuNode}
		_, err := ev.AdmitPod(context.Background(), pinned)
		require.NoError(t, err, "predicted admitted")
		created, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pinned, metav1.CreateOptions{})
		require.NoError(t, err, "a run pinned to a node of its pool is admitted")
		assert.Equal(t, gpuNode, waitBound(t, cs, runs, created.Name).Spec.NodeName)
	})

	t.Run("plan and check show a category placed on the core pool, or on no pool, as refused", func(t *testing.T) {
		misplaced := []string{"--set", "nodeSelectors.tensorboards.polyaxon=core", "--set", "nodeSelectors.notebooks=null"}
		r := c.deploy(t, append([]string{"plan", "--profile", "production", "--no-release", "-o", "json"}, misplaced...)...).requireExit(t, 3)
		var pr struct {
			Categories []struct {
				Category string `json:"category"`
				Result   struct {
					Verdict string `json:"verdict"`
					Message string `json:"message"`
				} `json:"result"`
			} `json:"categories"`
		}
		r.data(t, &pr)
		want := map[string]string{
			"tensorboards": denied + "spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core)",
			"notebooks":    denied + keepOff,
		}
		found := map[string]bool{}
		for _, x := range pr.Categories {
			msg, ok := want[x.Category]
			if !ok {
				assert.Equal(t, "fits", x.Result.Verdict, x.Category)
				continue
			}
			found[x.Category] = true
			assert.Equal(t, "unschedulable", x.Result.Verdict, x.Category)
			assert.Contains(t, x.Result.Message, "refused by the API server: ", x.Category)
			assert.Contains(t, x.Result.Message, msg, x.Category)
		}
		assert.Len(t, found, 2, "plan reports the tensorboards and notebooks categories")

		r = c.deploy(t, append([]string{"check", "--pre", "--profile", "production", "-o", "json"}, misplaced...)...).requireExit(t, 3)
		res := r.result(t)
		for category, msg := range want {
			assert.Contains(t, failedChecks(res), "scheduling-"+category)
			detail := checkDetail(res, "scheduling-"+category)
			assert.Contains(t, detail, "refused by the API server: ", category)
			assert.Contains(t, detail, msg, category)
		}
		// The production profile names the ingress controller's namespace; this cluster has none.
		assert.Equal(t, "no namespace is labelled kubernetes.io/metadata.name=ingress-nginx (networkPolicy.ingressNamespaceSelector): only pods of "+ns+" reach the gateway",
			checkDetail(res, "gateway-sources"))
	})

	// The local provider enforces no NetworkPolicy: the policies the API server accepted are
	// judged with cyclonus's matcher, with the addresses the install read from this cluster.
	t.Run("the API server accepted the runs' NetworkPolicies, which keep run pods from its addresses", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		// The runs' policies are with the runs; the gateway's (ingress from the runs' namespace)
		// with the platform.
		list, err := c.Clientset.NetworkingV1().NetworkPolicies(runs).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var policies []*networkingv1.NetworkPolicy
		names := map[string]bool{}
		for i := range list.Items {
			policies = append(policies, &list.Items[i])
			names[list.Items[i].Name] = true
		}
		assert.True(t, names[releaseName+"-runs"] && names[releaseName+"-runs-distributed"], "the runs' policies are installed in %s: %v", runs, names)
		platform, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for i := range platform.Items {
			policies = append(policies, &platform.Items[i])
			assert.NotContains(t, []string{releaseName + "-runs", releaseName + "-runs-distributed"}, platform.Items[i].Name, "no runs' policy left in %s", ns)
		}
		svc, err := c.Clientset.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		require.NoError(t, err)
		slice, err := c.Clientset.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		require.NoError(t, err)
		apiAddrs := slices.Clone(svc.Spec.ClusterIPs)
		for _, e := range slice.Endpoints {
			apiAddrs = append(apiAddrs, e.Addresses...)
		}
		require.NotEmpty(t, apiAddrs)

		judge := matcher.BuildNetworkPolicies(true, policies)
		job := loadRunPod(t, "job.yaml", runs)
		gateway, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
		require.NoError(t, err)
		require.NotEmpty(t, gateway.Items)
		pod := func(p *corev1.Pod, ip string) *matcher.TrafficPeer {
			return &matcher.TrafficPeer{IP: ip, Internal: &matcher.InternalPeer{PodLabels: p.Labels, Namespace: p.Namespace,
				NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": p.Namespace}}}
		}
		from := pod(job, "10.244.9.9")
		reach := func(to *matcher.TrafficPeer, port int) bool {
			return judge.IsTrafficAllowed(&matcher.Traffic{Source: from, Destination: to, ResolvedPort: port, Protocol: corev1.ProtocolTCP}).IsAllowed()
		}
		for _, addr := range apiAddrs {
			assert.False(t, reach(&matcher.TrafficPeer{IP: addr}, 443), "a run pod reaches the API server at %s", addr)
			assert.False(t, reach(&matcher.TrafficPeer{IP: addr}, 6443), "a run pod reaches the API server at %s", addr)
		}
		assert.False(t, reach(&matcher.TrafficPeer{IP: "169.254.169.254"}, 80), "a run pod reaches the metadata address")
		assert.True(t, reach(&matcher.TrafficPeer{IP: "203.0.113.7"}, 443), "a run pod reaches the internet")
		assert.True(t, reach(pod(&gateway.Items[0], "10.244.1.1"), 8003), "a run pod reaches the gateway's runs' port")
		assert.False(t, reach(pod(&gateway.Items[0], "10.244.1.1"), 8000), "a run pod reaches the gateway's users' port, whose streams serve every project's files")
	})

	// Issue 37, fail closed and seen: a deleted binding turns its policy off without a word
	// from the API server; `check` names it, and `recover` puts it back as the deployed
	// revision has it.
	t.Run("a deleted or weakened guard fails check, and recover puts it back", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		const runsNS = "polyaxon-runs"
		objects := ns + "-" + releaseName + "-runs-objects"
		bindings := c.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
		require.NoError(t, bindings.Delete(ctx, policy, metav1.DeleteOptions{}))
		b, err := bindings.Get(ctx, objects, metav1.GetOptions{})
		require.NoError(t, err)
		b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
		_, err = bindings.Update(ctx, b, metav1.UpdateOptions{})
		require.NoError(t, err)

		pinned := func() error {
			pod := loadRunPod(t, "job.yaml", runsNS)
			pod.Spec.NodeName = coreNode
			_, err := c.Clientset.CoreV1().Pods(runsNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		// The API server's policy informer sees the binding go within moments.
		waitFor(t, time.Minute, "without its binding the pods' restrictions refuse nothing", func(context.Context) (bool, string, error) {
			err := pinned()
			return err == nil, fmt.Sprint(err), nil
		})

		res := c.deploy(t, "check", "-o", "json").result(t)
		assert.Contains(t, failedChecks(res), "run-guards")
		detail := checkDetail(res, "run-guards")
		assert.Contains(t, detail, "ValidatingAdmissionPolicyBinding "+policy+" missing")
		assert.Contains(t, detail, "ValidatingAdmissionPolicyBinding "+objects+" changed")
		assert.Contains(t, detail, "`polyaxon-deploy recover` puts them back")

		out := c.deploy(t, "recover", "--yes").requireExit(t, 0)
		assert.Contains(t, out.Stderr, "run guards put back as the deployed revision has them")
		res = c.deploy(t, "check", "-o", "json").result(t)
		assert.NotContains(t, failedChecks(res), "run-guards", checkDetail(res, "run-guards"))
		b, err = bindings.Get(ctx, objects, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
		waitFor(t, time.Minute, "the restored binding refusing again", func(context.Context) (bool, string, error) {
			err = pinned()
			return err != nil, "admitted", nil
		})
		assert.Contains(t, err.Error(), denied+"spec.nodeName: a run pod may not pick its node ("+coreNode+")")
	})
}

// afterForbidden is an admission refusal without the pod's name (`pods "<name>" is forbidden: `).
func afterForbidden(msg string) string {
	_, after, _ := strings.Cut(msg, " is forbidden: ")
	return after
}

// offlineAdmitter is what `plan` and `check` evaluate: the chart's run admission policies,
// mutating and validating, as `render` prints them for the production profile.
func offlineAdmitter(t *testing.T, namespace string) *admission.Evaluator {
	t.Helper()
	objs := renderedObjects(t, namespace, []string{
		"templates/runs/mutatingadmissionpolicy.yaml", "templates/runs/mutatingadmissionpolicybinding.yaml",
		"templates/runs/validatingadmissionpolicy.yaml", "templates/runs/validatingadmissionpolicybinding.yaml"})
	ev, err := admission.New(admission.Policies(objs))
	require.NoError(t, err)
	require.NoError(t, ev.AddValidating(admission.ValidatingPolicies(objs)))
	require.Equal(t, 1, ev.ValidatingLen(), "the production release renders the runs' restrictions")
	return ev
}
