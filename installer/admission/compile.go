package admission

import (
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// compile builds the evaluator the API server builds for a stored policy. Its own compilePolicy
// (policy/mutating/compilation.go) is unexported; this uses the same exported building blocks.
// mode NewExpressions is the stricter environment the server checks a policy with on create.
func compile(p *admissionregistrationv1.MutatingAdmissionPolicy, mode environment.Type) (mutating.PolicyEvaluator, error) {
	if p.Spec.ParamKind != nil {
		return mutating.PolicyEvaluator{}, errors.New("spec.paramKind: policies with params are not evaluated offline")
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return mutating.PolicyEvaluator{}, fmt.Errorf("CEL compiler: %w", err)
	}
	var errs []error
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&mutating.Variable{Name: v.Name, Expression: v.Expression}, opts, mode)
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("spec.variables[%d] (%s): %w", i, v.Name, r.Error))
		}
	}
	var matcher matchconditions.Matcher
	if n := len(p.Spec.MatchConditions); n > 0 {
		accessors := make([]plugincel.ExpressionAccessor, n)
		for i := range p.Spec.MatchConditions {
			accessors[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		cond := compiler.CompileCondition(accessors, opts, mode)
		for _, e := range cond.CompilationErrors() {
			errs = append(errs, fmt.Errorf("spec.matchConditions: %w", e))
		}
		matcher = matchconditions.NewMatcher(cond, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	var patchers []patch.Patcher
	for i, m := range p.Spec.Mutations {
		var ev plugincel.MutatingEvaluator
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			ev = compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, mode)
			patchers = append(patchers, patch.NewJSONPatcher(ev))
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			ev = compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOpts, mode)
			patchers = append(patchers, patch.NewApplyConfigurationPatcher(ev))
		default:
			errs = append(errs, fmt.Errorf("spec.mutations[%d]: patchType %q needs its jsonPatch or applyConfiguration field", i, m.PatchType))
			continue
		}
		for _, e := range ev.CompilationErrors() {
			errs = append(errs, fmt.Errorf("spec.mutations[%d] (%s): %w", i, m.PatchType, e))
		}
	}
	return mutating.PolicyEvaluator{Matcher: matcher, Mutators: patchers, CompositedCompiler: compiler}, errors.Join(errs...)
}

// The API server's scheme defaults policies and bindings on create
// (k8s.io/kubernetes/pkg/apis/admissionregistration/v1, not importable as a library). Without
// them a nil namespace or object selector matches nothing.
func setPolicyDefaults(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	setMatchResourcesDefaults(p.Spec.MatchConstraints)
}

func setBindingDefaults(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	setMatchResourcesDefaults(b.Spec.MatchResources)
}

func setMatchResourcesDefaults(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		m.MatchPolicy = &eq
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				rules[i].Scope = &all
			}
		}
	}
}
