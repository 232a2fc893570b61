package charts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// Issue 24, "runs are runs" and "runs never share the core pool in production": a
// ValidatingAdmissionPolicy refuses run pods that name another service account, a node, a
// priority class or scheduler outside the allowed lists, or a protected category's nodes.

const restrictionsPolicy = testNamespace + "-" + testRelease + "-runs-restrictions"

// testRunsNamespace is where the production profile sends runs (runs.namespace).
const testRunsNamespace = "polyaxon-runs"

func restrictions(t *testing.T, r rendered) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	o := r.get("ValidatingAdmissionPolicy", restrictionsPolicy)
	require.NotNil(t, o, "the release has the runs' restrictions policy")
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	decodeStrict(t, o, &p)
	return &p
}

func policyVariable(p *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}

func TestRunRestrictionsPolicyRendered(t *testing.T) {
	prod := render(t, profileValues(t, "production"))
	p := restrictions(t, prod)
	assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
	assert.Equal(t, map[string]string{corev1.LabelMetadataName: testRunsNamespace}, p.Spec.MatchConstraints.NamespaceSelector.MatchLabels,
		"production judges the pods of the runs' own namespace")
	require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, p.Spec.MatchConstraints.ResourceRules[0].Operations,
		"CREATE only: a bound pod has a nodeName, its later updates are not judged")
	assert.Empty(t, p.Spec.MatchConditions, "in the runs' own namespace every pod is a run's")
	assert.Equal(t, `["polyaxon-artifacts"]`, policyVariable(p, "claims"), "runs mount the artifacts store's claim and no other")
	assert.Equal(t, `[]`, policyVariable(p, "secrets"))
	assert.Equal(t, `["kube-root-ca.crt"]`, policyVariable(p, "configMaps"))
	assert.Equal(t, `["`+testRelease+`-runs"]`, policyVariable(p, "serviceAccounts"))
	assert.Equal(t, `[""]`, policyVariable(p, "priorityClasses"), "no priority class by default")
	assert.Equal(t, `["", "default-scheduler"]`, policyVariable(p, "schedulers"))
	assert.Equal(t, `{2232: "postgresql", 2234: "redis"}`, policyVariable(p, "dataStoreIds"), "the data stores' ids, none of them the runs'")
	// The production profile protects core and the dependencies, all on the core pool.
	var want []string
	for _, c := range []string{"core", "postgresql", "rabbitmq", "redis"} {
		want = append(want, `{"labels": dyn({"polyaxon": dyn("core")}), "name": dyn("`+c+`"), "selector": dyn("polyaxon=core")}`)
	}
	assert.Equal(t, "["+strings.Join(want, ", ")+"]", policyVariable(p, "protected"))
	var exprs []string
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression)
		assert.Equal(t, "Forbidden", string(*v.Reason))
	}
	assert.Equal(t, []string{
		`variables.badSecrets.size() == 0`,
		`variables.badConfigMaps.size() == 0`,
		`variables.badClaims.size() == 0`,
		`false || variables.ephemeral.size() == 0`,
		`variables.nameservers.size() == 0`,
		`variables.badTolerations.size() == 0`,
		`variables.nodeDNS.size() == 0`,
		`variables.badVolumeKinds.size() == 0`,
		`variables.badTokens.size() == 0`,
		`variables.badAnnotations.size() == 0`,
		`variables.badServiceAccounts.size() == 0`,
		`variables.sharedProcesses.size() == 0`,
		`variables.nodeNames.size() == 0`,
		`variables.badPriorityClasses.size() == 0`,
		`variables.badIds.size() == 0`,
		`variables.badSchedulers.size() == 0`,
		`variables.badEmptyDirs.size() == 0`,
		`variables.targeted.size() == 0`,
		`variables.unconfined.size() == 0`,
		`variables.confined`,
	}, exprs)
	assert.Equal(t, `["polyaxon=experiments", "polyaxon=builds"]`, policyVariable(p, "runPools"),
		"the run pools a refusal suggests: the categories' pools, none of them a protected one")
	b := prod.get("ValidatingAdmissionPolicyBinding", restrictionsPolicy)
	require.NotNil(t, b)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	decodeStrict(t, b, &binding)
	assert.Equal(t, restrictionsPolicy, binding.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, binding.Spec.ValidationActions)

	dev := restrictions(t, render(t, profileValues(t, "development")))
	assert.Equal(t, "[]", policyVariable(dev, "protected"), "development protects no category")
	assert.Equal(t, map[string]string{corev1.LabelMetadataName: testNamespace}, dev.Spec.MatchConstraints.NamespaceSelector.MatchLabels,
		"runs share the release namespace in development")
	require.Len(t, dev.Spec.MatchConditions, 1, "there, only the pods Polyaxon labels as runs are judged")
	assert.Contains(t, dev.Spec.MatchConditions[0].Expression, `"app.kubernetes.io/part-of"].orValue("") == "polyaxon-runs"`)
	def := restrictions(t, render(t))
	assert.Equal(t, "[]", policyVariable(def, "protected"), "the chart default protects no category")

	// A protected category without a nodeSelector has nothing to match.
	noCore := restrictions(t, render(t, map[string]any{"runs": map[string]any{"protectedCategories": []any{"core", "redis"}},
		"redis": map[string]any{"enabled": true, "nodeSelector": map[string]any{"pool": "cache"}}}))
	assert.Equal(t, `[{"labels": dyn({"pool": dyn("cache")}), "name": dyn("redis"), "selector": dyn("pool=cache")}]`, policyVariable(noCore, "protected"))
	// A category placed on a protected pool, or on no pool, is no pool to suggest.
	onCore := restrictions(t, render(t, profileValues(t, "production"), map[string]any{"nodeSelectors": map[string]any{
		"experiments": map[string]any{"polyaxon": "core"}, "jobs": nil, "tensorboards": map[string]any{"polyaxon": "core", "gpu": "yes"}}}))
	assert.Equal(t, `["polyaxon=builds", "polyaxon=experiments"]`, policyVariable(onCore, "runPools"))
	// Without a runs service account Polyaxon names none: the pod gets "default".
	noSA := restrictions(t, render(t, map[string]any{"runs": map[string]any{"serviceAccount": map[string]any{"create": false}}}))
	assert.Equal(t, `["default"]`, policyVariable(noSA, "serviceAccounts"))

	// Placement off: the restrictions stay (no value turns them off).
	off := render(t, map[string]any{"runs": map[string]any{"admissionPolicies": map[string]any{"enabled": false}}})
	restrictions(t, off)
	assert.NotNil(t, off.get("ValidatingAdmissionPolicyBinding", restrictionsPolicy))
	// No runs, nothing to restrict.
	noAgent := render(t, map[string]any{"agent": map[string]any{"enabled": false}})
	assert.Empty(t, noAgent.byKind("ValidatingAdmissionPolicy"))
}

// admitter evaluates a release's Mutating and ValidatingAdmissionPolicies with the API
// server's dispatchers (installer/admission).
func admitter(t testing.TB, r rendered) *admission.Evaluator {
	t.Helper()
	objs := typedObjects(t, r)
	ev, err := admission.New(admission.Policies(objs))
	require.NoError(t, err)
	require.NoError(t, ev.AddValidating(admission.ValidatingPolicies(objs)))
	require.Equal(t, 2, ev.ValidatingLen(), "the run pods' and the run objects' restrictions")
	return ev
}

// podChange is a change to a run pod fixture and the refusal it must get.
type podChange struct {
	name    string
	change  func(*corev1.Pod)
	message string
}

// requireRefused: job.yaml with c's change is refused by the API server's dispatcher, with
// c's message; it returns the refusal.
func requireRefused(t *testing.T, ev *admission.Evaluator, c podChange) error {
	t.Helper()
	pod := runPod(t, "job.yaml")
	c.change(pod)
	_, err := ev.AdmitPod(context.Background(), pod)
	require.Error(t, err, c.name)
	assert.True(t, admission.IsRefusal(err), "%s: %v", c.name, err)
	assert.Contains(t, err.Error(), c.message, c.name)
	return err
}

// runPod is a fixture of e2e/testdata/runpods with the release's runs service account, in the
// production profile's runs namespace.
func runPod(t testing.TB, name string) *corev1.Pod { return runPodIn(t, name, testRunsNamespace) }

func runPodIn(t testing.TB, name, namespace string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	raw := strings.NewReplacer("RUNS_SA", testRelease+"-runs", "STORE_CLAIM", testRelease+"-artifacts", "STORE_NAME", "artifacts").
		Replace(string(runPodFixture(t, name)))
	require.NoError(t, yaml.UnmarshalStrict([]byte(raw), &pod), name)
	pod.Namespace = namespace
	return &pod
}

func requiredNodeAffinity(exprs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
}

func TestRunRestrictionsRefuseAndAdmit(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production")))
	ctx := context.Background()
	for _, f := range append(runPodFixtures, "own-node-selector.yaml") {
		_, err := ev.AdmitPod(ctx, runPod(t, f))
		assert.NoError(t, err, "%s as Polyaxon sends it is admitted", f)
	}
	const denied = "ValidatingAdmissionPolicy '" + restrictionsPolicy + "' with binding '" + restrictionsPolicy + "' denied request: "
	refused := []podChange{
		{"another service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = testRelease + "-agent" },
			"spec.serviceAccountName: a run pod uses the runs ServiceAccount polyaxon-runs, not polyaxon-agent: remove serviceAccountName from the run's environment"},
		{"no service account (the namespace's default)", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "" },
			"spec.serviceAccountName: a run pod uses the runs ServiceAccount polyaxon-runs, not default: remove serviceAccountName from the run's environment"},
		{"a node of its own", func(p *corev1.Pod) { p.Spec.NodeName = "core-0" },
			"spec.nodeName: a run pod may not pick its node (core-0): remove nodeName from the run's environment; the scheduler places it on its category's nodes"},
		{"a priority class", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" },
			"spec.priorityClassName: system-cluster-critical is not allowed for runs (allowed: none): remove priorityClassName from the run's environment, or add it to the chart value runs.allowedPriorityClasses"},
		{"another scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" },
			"spec.schedulerName: my-scheduler is not allowed for runs (allowed: default-scheduler): remove schedulerName from the run's environment, or add it to the chart value runs.allowedSchedulers"},
		// Issue 53: the hostile review's polyaxonfile, piece by piece.
		{"a toleration of every taint", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}, "spec.tolerations: a toleration with no key (it tolerates every taint): a run pod may tolerate only its own pools' taints, not the control plane's or a protected pool's (node-role.kubernetes.io/control-plane, node-role.kubernetes.io/master)"},
		{"a toleration of the control plane", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}, "spec.tolerations: a toleration of node-role.kubernetes.io/control-plane"},
		{"any Linux node, away from the pools' label", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpDoesNotExist})
		}, "spec.nodeSelector/spec.affinity: a run pod must land on a run pool (polyaxon=experiments or polyaxon=builds)"},
		{"any node but core's", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"core"}})
		}, "spec.nodeSelector/spec.affinity: a run pod must land on a run pool (polyaxon=experiments or polyaxon=builds)"},
	}
	for _, c := range refused {
		err := requireRefused(t, ev, c)
		if strings.HasPrefix(c.message, "spec.") {
			assert.Contains(t, err.Error(), denied+c.message, c.name)
		}
	}
	admitted := []struct {
		name   string
		change func(*corev1.Pod)
	}{
		{"the default scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }},
		{"its GPU pool's taint, and the kubelet's own NoExecute tolerations", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
		}},
		{"a run pool by required affinity", func(p *corev1.Pod) {
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpIn, Values: []string{"experiments", "builds"}})
		}},
	}
	for _, c := range admitted {
		pod := runPod(t, "job.yaml")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		assert.NoError(t, err, c.name)
	}
	// In the runs' own namespace a pod without Polyaxon's run label is judged all the same.
	pod := runPod(t, "job.yaml")
	delete(pod.Labels, "app.kubernetes.io/part-of")
	pod.Spec.NodeName = "core-0"
	_, err := ev.AdmitPod(ctx, pod)
	assert.ErrorContains(t, err, "spec.nodeName: a run pod may not pick its node (core-0)")

	// Allowed lists come from values; development protects nothing, and shares the release
	// namespace with runs: there a pod without the run label is not a run.
	ev = admitter(t, render(t, profileValues(t, "development"), map[string]any{"runs": map[string]any{
		"allowedPriorityClasses": []any{"runs-low"}, "allowedSchedulers": []any{"default-scheduler", "volcano"}}}))
	pod = runPodIn(t, "job.yaml", testNamespace)
	delete(pod.Labels, "app.kubernetes.io/part-of")
	pod.Spec.NodeName = "core-0"
	_, err = ev.AdmitPod(ctx, pod)
	assert.NoError(t, err, "a pod without Polyaxon's run label is not judged in the release namespace")
	pod = runPodIn(t, "job.yaml", testNamespace)
	pod.Spec.NodeSelector = map[string]string{"polyaxon": "core", corev1.LabelHostname: "core-0"}
	pod.Spec.PriorityClassName = "runs-low"
	pod.Spec.SchedulerName = "volcano"
	_, err = ev.AdmitPod(ctx, pod)
	assert.NoError(t, err)
	pod.Spec.PriorityClassName = "high"
	_, err = ev.AdmitPod(ctx, pod)
	assert.ErrorContains(t, err, "spec.priorityClassName: high is not allowed for runs (allowed: runs-low)")
}

// checkRunsKeptOffProtectedPools: with the production profile, a run pod that could land on
// the core pool is refused with the reason, whether it names the pool (nodeSelector, required
// affinity) or merely does not keep off it by the pool's label (a hostname, another label a
// core node may carry); a run pod that names a run pool, or none (its category's applies), is
// admitted.
func checkRunsKeptOffProtectedPools(t testing.TB, ch *chart.Chart) {
	ev := admitter(t, renderChart(t, ch, profileValues(t, "production")))
	ctx := context.Background()
	const targets = "spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core): remove that nodeSelector or node affinity from the run's environment (runs.protectedCategories)"
	const onPool = "spec.nodeSelector/spec.affinity: a run pod must land on a run pool (polyaxon=experiments or polyaxon=builds)"
	const keepOff = "spec.nodeSelector/spec.affinity: a run pod must keep off the nodes of the protected categories core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core) by their labels, and a hostname, another label or no nodeSelector may land it there: " +
		"name a run pool in the run's environment.nodeSelector (polyaxon=experiments or polyaxon=builds); a run that names none gets its category's (chart values nodeSelectors.<category>, runs.protectedCategories)"
	terms := func(ts ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
		a := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		for _, t := range ts {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		return a
	}
	in := func(key string, values ...string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}
	}
	refused := []struct {
		name    string
		change  func(*corev1.Pod)
		message string
	}{
		{"the core pool by nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"polyaxon": "core"} }, targets},
		{"the core pool by nodeSelector with another label", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"polyaxon": "core", "zone": "a"}
		}, targets},
		// A run without a nodeSelector gets its category's (the placement policies run first),
		// which keeps off core: an affinity alone cannot reach core, one with a nodeSelector can.
		{"the core pool by required affinity In", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpIn, Values: []string{"experiments", "core"}})
		}, targets},
		{"any pool by required affinity Exists", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpExists})
		}, targets},
		{"a core node by hostname", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "core-0"} }, keepOff},
		{"a label only core nodes carry", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "nvme-db"} }, keepOff},
		{"a core node by one of two affinity terms", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = terms(in("polyaxon", "experiments"), in(corev1.LabelHostname, "core-0"))
		}, keepOff},
		{"a pool label with Gt (not provably another value)", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = terms([]corev1.NodeSelectorRequirement{{Key: "polyaxon", Operator: corev1.NodeSelectorOpGt, Values: []string{"1"}}})
		}, targets},
		// Keeping off the protected pools is not landing on a run pool (issue 53): a node of no
		// pool, the control plane's among them, is neither.
		{"a required affinity away from core only", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"core"}})
		}, onPool},
		{"one affinity term on a run pool, another on nodes of no pool", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = terms(append(in("polyaxon", "experiments"), in(corev1.LabelHostname, "core-0")...),
				[]corev1.NodeSelectorRequirement{{Key: "polyaxon", Operator: corev1.NodeSelectorOpDoesNotExist}})
		}, onPool},
	}
	for _, c := range refused {
		pod := runPod(t, "job.yaml")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		if !assert.Error(t, err, c.name) {
			continue
		}
		assert.True(t, admission.IsRefusal(err), "%s: %v", c.name, err)
		assert.Contains(t, err.Error(), "denied request: "+c.message, c.name)
	}
	admitted := []struct {
		name   string
		change func(*corev1.Pod)
	}{
		{"no scheduling of its own (its category's pool)", func(p *corev1.Pod) {}},
		{"another pool by nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"polyaxon": "builds"} }},
		{"a node of a run pool by hostname", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"polyaxon": "experiments", corev1.LabelHostname: "experiments-0"}
		}},
		{"an affinity only (the category's nodeSelector is added)", func(p *corev1.Pod) {
			p.Spec.Affinity = terms(in(corev1.LabelHostname, "core-0"))
		}},
		{"a nodeSelector excluding core with an Exists affinity", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"polyaxon": "experiments"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpExists})
		}},
	}
	for _, c := range admitted {
		pod := runPod(t, "job.yaml")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		assert.NoError(t, err, c.name)
	}
	for _, f := range append(runPodFixtures, "own-node-selector.yaml") {
		_, err := ev.AdmitPod(ctx, runPod(t, f))
		assert.NoError(t, err, "%s as Polyaxon sends it is admitted", f)
	}
}

func TestRunsKeptOffProtectedPools(t *testing.T) { checkRunsKeptOffProtectedPools(t, loadChart(t)) }

// plan and check see a category whose default placement is a protected pool, or no pool, as
// refused.
func TestRunRestrictionsRefuseACategoryPlacedOnCore(t *testing.T) {
	p := runPlacement(t, render(t, profileValues(t, "production")))
	for _, c := range p.Categories {
		assert.Empty(t, c.Refused, c.Category)
	}
	p = runPlacement(t, render(t, profileValues(t, "production"), map[string]any{"nodeSelectors": map[string]any{"tensorboards": map[string]any{"polyaxon": "core"}}}))
	for _, c := range p.Categories {
		if c.Category == "tensorboards" {
			assert.Contains(t, c.Refused, "denied request: spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core)")
		} else {
			assert.Empty(t, c.Refused, c.Category)
		}
	}
	// Without a pool of its own a category's runs could land anywhere, core included.
	p = runPlacement(t, render(t, profileValues(t, "production"), map[string]any{"nodeSelectors": map[string]any{"notebooks": nil}}))
	for _, c := range p.Categories {
		if c.Category == "notebooks" {
			assert.Contains(t, c.Refused, "denied request: spec.nodeSelector/spec.affinity: a run pod must keep off the nodes of the protected categories core (polyaxon=core)")
			assert.Contains(t, c.Refused, "name a run pool in the run's environment.nodeSelector (polyaxon=experiments or polyaxon=builds)")
		} else {
			assert.Empty(t, c.Refused, c.Category)
		}
	}
	// No category with a pool: the refusal says to give one a pool.
	none := map[string]any{}
	for _, c := range []string{"experiments", "jobs", "builds", "tensorboards", "notebooks"} {
		none[c] = nil
	}
	p = runPlacement(t, render(t, profileValues(t, "production"), map[string]any{"nodeSelectors": none}))
	for _, c := range p.Categories {
		assert.Contains(t, c.Refused, "no run category is placed elsewhere: give a run category a pool of its own (chart values nodeSelectors.<category>, runs.protectedCategories)", c.Category)
	}
}

// Issue 37: a run pod references only what runs are given (the artifacts store, the
// connections, the pull secrets), creates no claim of its own and resolves names with the
// cluster's DNS. Each reference a polyaxonfile can write is refused with what it named.
func TestRunPodsUseOnlyWhatRunsAreGiven(t *testing.T) {
	conns := map[string]any{"connections": []any{
		map[string]any{"name": "training-credentials", "kind": "custom", "secret": map[string]any{"name": "training-credentials", "mountPath": "/etc/secrets"}},
		map[string]any{"name": "datasets", "kind": "volume_claim", "schema": map[string]any{"volumeClaim": "datasets", "mountPath": "/data"}},
		map[string]any{"name": "settings", "kind": "custom", "configMap": map[string]any{"name": "run-settings", "mountPath": "/etc/settings"}},
	}}
	ev := admitter(t, render(t, profileValues(t, "production"), conns))
	ctx := context.Background()
	secretVolume := func(name, secret string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	}
	secretEnv := func(secret, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: "LEAK", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	claim := func(name, claim string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	refused := []podChange{
		{"the platform Secret as a volume", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("platform", "polyaxon-platform"))
		},
			"a run pod may use only the Secrets runs are given (training-credentials): volume platform mounts Secret polyaxon-platform: remove it from the polyaxonfile"},
		{"the database password through secretKeyRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, secretEnv("polyaxon-postgresql", "postgres-password"))
		}, "container polyaxon-main reads LEAK from Secret polyaxon-postgresql"},
		{"the platform Secret through envFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = append(p.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "polyaxon-platform"}}})
		}, "container polyaxon-main loads Secret polyaxon-platform"},
		{"Helm's release record in an init container", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Env = append(p.Spec.InitContainers[0].Env, secretEnv("sh.helm.release.v1.polyaxon.v1", "release"))
		}, "reads LEAK from Secret sh.helm.release.v1.polyaxon.v1"},
		{"a projected Secret", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "training-credentials"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "polyaxon-polyaxon-deploy-inputs"}}}}}}})
		}, "volume both projects Secret polyaxon-polyaxon-deploy-inputs:"},
		{"a pull secret of its own", func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "platform-registry"}}
		}, "imagePullSecrets names platform-registry"},
		{"the Postgres claim", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, claim("db", "data-polyaxon-postgresql-0"))
		},
			"a run pod may mount only the claims runs are given (polyaxon-artifacts, datasets): volume db mounts claim data-polyaxon-postgresql-0"},
		{"a platform ConfigMap", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "polyaxon-config"}}}})
		}, "a run pod may use only the ConfigMaps runs are given (kube-root-ca.crt, run-settings): volume cfg mounts ConfigMap polyaxon-config"},
		{"an ephemeral volume", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
		}, "spec.volumes: a run pod may not create a claim of its own (ephemeral volume scratch)"},
		{"an outside nameserver", func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.53"}}
		}, "spec.dnsConfig.nameservers: a run pod resolves names with the cluster's DNS only, not 203.0.113.53"},
		// Issue 53: what was admitted.
		{"the node's resolver", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault },
			"spec.dnsPolicy: a run pod resolves names with the cluster's DNS only, not the node's (dnsPolicy Default)"},
		{"an inline CSI volume of a secrets-store driver", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "platform"}}}})
		}, "spec.volumes: volume vault is an inline CSI volume of driver secrets-store.csi.k8s.io: a run pod may use inline CSI volumes only of the drivers runs are given (none)"},
		{"an image volume", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "api", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "polyaxon/polyaxon-api:2.18.0"}}})
		}, "volume api mounts image polyaxon/polyaxon-api:2.18.0"},
		{"a token for a cloud's audience, for a year", func(p *corev1.Pod) {
			year := int64(365 * 24 * 3600)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cloud", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", ExpirationSeconds: &year, Path: "token"}}}}}})
		}, "spec.volumes: volume cloud projects a token for audience sts.amazonaws.com, 31536000 s: a run pod may project its ServiceAccount's token only for the API server and for at most 3607 s"},
		{"a token for the API server, for a day", func(p *corev1.Pod) {
			day := int64(24 * 3600)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "long", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &day, Path: "token"}}}}}})
		}, "volume long projects a token for audience the API server's, 86400 s"},
		{"a second network (Multus)", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "host-net"}
		}, "metadata.annotations: k8s.v1.cni.cncf.io/networks: a run pod may not ask a network plugin or a mesh for another network or egress path"},
		{"an address of its choosing (Calico) and a mesh's egress exclusion (Istio)", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"cni.projectcalico.org/ipAddrs": `["10.0.0.5"]`, "traffic.sidecar.istio.io/excludeOutboundIPRanges": "0.0.0.0/0"}
		}, "cni.projectcalico.org/ipAddrs"},
	}
	for _, c := range refused {
		requireRefused(t, ev, c)
	}
	admitted := []struct {
		name   string
		change func(*corev1.Pod)
	}{
		{"a connection's Secret and claim", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("training-credentials", "training-credentials"), claim("datasets", "datasets"))
		}},
		{"a connection's ConfigMap and the CA bundle", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "run-settings"}}}}}}})
		}},
		{"the cluster's DNS with options of its own", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"example.internal"}}
		}},
		{"the kubelet's own API token (kube-api-access: the API server's audience, 3607 s)", func(p *corev1.Pod) {
			exp := int64(3607)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}})
		}},
		{"annotations of its own", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"example.com/team": "vision", "prometheus.io/scrape": "true"}
		}},
	}
	for _, c := range admitted {
		pod := runPod(t, "job.yaml")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		assert.NoError(t, err, c.name)
	}

	// Ephemeral volumes on request (the quota bounds them); the pull secrets the chart gives.
	ev = admitter(t, render(t, profileValues(t, "production"), map[string]any{"imagePullSecrets": []any{"registry"},
		"runs": map[string]any{"allowEphemeralVolumes": true}}))
	pod := runPod(t, "job.yaml")
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	_, err := ev.AdmitPod(ctx, pod)
	assert.NoError(t, err)
}

// The run objects the agent creates (polyaxon.com/v1, written by Polyaxon's own converter:
// e2e/operator/testdata) are judged on every pod template they hold, so a refusal reaches the
// agent, which reports it as the run's failed status.
func TestRunObjectsUseOnlyWhatRunsAreGiven(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production")))
	ctx := context.Background()
	resources := map[string]string{"Job": "jobs", "Service": "services", "KfJob": "kfjobs", "Cluster": "clusters"}
	for _, f := range []string{"job.json", "service.json", "tfjob.json", "pytorchjob.json", "mpijob.json", "raycluster.json", "daskcluster.json"} {
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(readFile(t, "../e2e/operator/testdata/"+f)), f)
		obj.SetNamespace(testRunsNamespace)
		gvr := schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: resources[obj.GetKind()]}
		require.NoError(t, ev.AdmitObject(ctx, obj, gvr), "%s as Polyaxon's converter writes it is admitted", f)

		// The same object with the platform Secret mounted in each of its pod templates.
		templates := 0
		var walk func(v any)
		walk = func(v any) {
			switch t := v.(type) {
			case map[string]any:
				if spec, ok := t["spec"].(map[string]any); ok {
					if _, ok := spec["containers"]; ok {
						vols, _ := spec["volumes"].([]any)
						spec["volumes"] = append(vols, map[string]any{"name": "platform", "secret": map[string]any{"secretName": "polyaxon-platform"}})
						templates++
						return
					}
				}
				for _, x := range t {
					walk(x)
				}
			case []any:
				for _, x := range t {
					walk(x)
				}
			}
		}
		walk(obj.Object)
		require.NotZero(t, templates, f)
		err := ev.AdmitObject(ctx, obj, gvr)
		require.Error(t, err, f)
		assert.True(t, admission.IsRefusal(err), "%s: %v", f, err)
		assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+testNamespace+"-"+testRelease+"-runs-objects'", f)
		assert.Contains(t, err.Error(), "a run pod may use only the Secrets runs are given (none): volume platform mounts Secret polyaxon-platform", f)
		if templates > 1 {
			assert.Equal(t, templates, strings.Count(err.Error(), "volume platform mounts Secret polyaxon-platform"), "%s: each template is named", f)
		}
	}
}
