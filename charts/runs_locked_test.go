package charts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// Issue 24, "runs are runs" and "runs never share the core pool in production": a
// ValidatingAdmissionPolicy refuses run pods that name another service account, a node, a
// priority class or scheduler outside the allowed lists, or a protected category's nodes.

const restrictionsPolicy = testNamespace + "-" + testRelease + "-runs-restrictions"

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
	assert.Equal(t, map[string]string{corev1.LabelMetadataName: testNamespace}, p.Spec.MatchConstraints.NamespaceSelector.MatchLabels)
	require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, p.Spec.MatchConstraints.ResourceRules[0].Operations,
		"CREATE only: a bound pod has a nodeName, its later updates are not judged")
	require.Len(t, p.Spec.MatchConditions, 1)
	assert.Contains(t, p.Spec.MatchConditions[0].Expression, `"app.kubernetes.io/part-of"].orValue("") == "polyaxon-runs"`)
	assert.Equal(t, `["`+testRelease+`-runs"]`, policyVariable(p, "serviceAccounts"))
	assert.Equal(t, `[""]`, policyVariable(p, "priorityClasses"), "no priority class by default")
	assert.Equal(t, `["", "default-scheduler"]`, policyVariable(p, "schedulers"))
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
		`object.spec.?serviceAccountName.orValue("default") in variables.serviceAccounts`,
		`object.spec.?nodeName.orValue("") == ""`,
		`object.spec.?priorityClassName.orValue("") in variables.priorityClasses`,
		`object.spec.?schedulerName.orValue("") in variables.schedulers`,
		`variables.targeted.size() == 0`,
	}, exprs)
	b := prod.get("ValidatingAdmissionPolicyBinding", restrictionsPolicy)
	require.NotNil(t, b)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	decodeStrict(t, b, &binding)
	assert.Equal(t, restrictionsPolicy, binding.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, binding.Spec.ValidationActions)

	dev := restrictions(t, render(t, profileValues(t, "development")))
	assert.Equal(t, "[]", policyVariable(dev, "protected"), "development protects no category")
	def := restrictions(t, render(t))
	assert.Equal(t, "[]", policyVariable(def, "protected"), "the chart default protects no category")

	// A protected category without a nodeSelector has nothing to match.
	noCore := restrictions(t, render(t, map[string]any{"runs": map[string]any{"protectedCategories": []any{"core", "redis"}},
		"redis": map[string]any{"enabled": true, "nodeSelector": map[string]any{"pool": "cache"}}}))
	assert.Equal(t, `[{"labels": dyn({"pool": dyn("cache")}), "name": dyn("redis"), "selector": dyn("pool=cache")}]`, policyVariable(noCore, "protected"))
	// Without a runs service account Polyaxon names none: the pod gets "default".
	noSA := restrictions(t, render(t, map[string]any{"runs": map[string]any{"serviceAccount": map[string]any{"create": false}}}))
	assert.Equal(t, `["default"]`, policyVariable(noSA, "serviceAccounts"))

	off := render(t, map[string]any{"runs": map[string]any{"admissionPolicies": map[string]any{"enabled": false}}})
	assert.Empty(t, off.byKind("ValidatingAdmissionPolicy"))
	assert.Empty(t, off.byKind("ValidatingAdmissionPolicyBinding"))
}

// admitter evaluates a release's Mutating and ValidatingAdmissionPolicies with the API
// server's dispatchers (installer/admission).
func admitter(t *testing.T, r rendered) *admission.Evaluator {
	t.Helper()
	objs := typedObjects(t, r)
	ev, err := admission.New(admission.Policies(objs))
	require.NoError(t, err)
	require.NoError(t, ev.AddValidating(admission.ValidatingPolicies(objs)))
	require.Equal(t, 1, ev.ValidatingLen())
	return ev
}

// runPod is a fixture of e2e/testdata/runpods with the release's runs service account.
func runPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	raw := strings.ReplaceAll(string(runPodFixture(t, name)), "RUNS_SA", testRelease+"-runs")
	require.NoError(t, yaml.UnmarshalStrict([]byte(raw), &pod), name)
	pod.Namespace = testNamespace
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
	refused := []struct {
		name    string
		change  func(*corev1.Pod)
		message string
	}{
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
		{"the core pool by nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"polyaxon": "core"} },
			"spec.nodeSelector/spec.affinity: a run pod may not target the nodes of the protected categories core (polyaxon=core), postgresql (polyaxon=core), rabbitmq (polyaxon=core), redis (polyaxon=core): remove that nodeSelector or node affinity from the run's environment (runs.protectedCategories)"},
		{"the core pool by nodeSelector with another label", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"polyaxon": "core", "zone": "a"}
		}, "may not target the nodes of the protected categories core (polyaxon=core)"},
		// A run without a nodeSelector gets its category's (the placement policies run first),
		// which excludes core: an affinity alone cannot reach core, one with a nodeSelector can.
		{"the core pool by required affinity In", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpIn, Values: []string{"experiments", "core"}})
		}, "may not target the nodes of the protected categories core (polyaxon=core)"},
		{"any pool by required affinity Exists", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpExists})
		}, "may not target the nodes of the protected categories core (polyaxon=core)"},
	}
	for _, c := range refused {
		pod := runPod(t, "job.yaml")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		require.Error(t, err, c.name)
		assert.True(t, admission.IsRefusal(err), "%s: %v", c.name, err)
		assert.Contains(t, err.Error(), c.message, c.name)
		if strings.HasPrefix(c.message, "spec.") {
			assert.Contains(t, err.Error(), denied+c.message, c.name)
		}
	}
	admitted := []struct {
		name   string
		change func(*corev1.Pod)
	}{
		{"a nodeSelector without the pool's label", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }},
		{"the default scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }},
		{"another pool by nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"polyaxon": "builds"} }},
		{"a required affinity away from core", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Affinity = requiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "polyaxon", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"core"}})
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
	// Not a run: the policy selects run pods only.
	pod := runPod(t, "job.yaml")
	delete(pod.Labels, "app.kubernetes.io/part-of")
	pod.Spec.NodeName = "core-0"
	_, err := ev.AdmitPod(ctx, pod)
	assert.NoError(t, err, "a pod without Polyaxon's run label is not judged")

	// Allowed lists come from values; development protects nothing.
	ev = admitter(t, render(t, profileValues(t, "development"), map[string]any{"runs": map[string]any{
		"allowedPriorityClasses": []any{"runs-low"}, "allowedSchedulers": []any{"default-scheduler", "volcano"}}}))
	pod = runPod(t, "job.yaml")
	pod.Spec.NodeSelector = map[string]string{"polyaxon": "core"}
	pod.Spec.PriorityClassName = "runs-low"
	pod.Spec.SchedulerName = "volcano"
	_, err = ev.AdmitPod(ctx, pod)
	assert.NoError(t, err)
	pod.Spec.PriorityClassName = "high"
	_, err = ev.AdmitPod(ctx, pod)
	assert.ErrorContains(t, err, "spec.priorityClassName: high is not allowed for runs (allowed: runs-low)")
}

// plan and check see a category whose default placement is a protected pool as refused.
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
}
