package admission

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// ValidatingPolicies picks the ValidatingAdmissionPolicies and their bindings out of rendered
// (typed) objects.
func ValidatingPolicies(objs []runtime.Object) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	var ps []*admissionregistrationv1.ValidatingAdmissionPolicy
	var bs []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range objs {
		switch t := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			ps = append(ps, t)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			bs = append(bs, t)
		}
	}
	return ps, bs
}

// Refusal is a pod the validating policies refuse: Err is the API server's own error (its
// message is what `kubectl` shows: "ValidatingAdmissionPolicy '<name>' with binding '<name>'
// denied request: <message>").
type Refusal struct{ Err error }

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// IsRefusal tells a refusal by a validating policy from a failure to evaluate.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// AddValidating compiles ValidatingAdmissionPolicies into the evaluator: AdmitPod runs them
// after the mutating ones, as the API server does. A CEL error fails, as the API server would
// refuse the policy.
func (e *Evaluator) AddValidating(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	var errs []error
	for _, p := range policies {
		p = p.DeepCopy()
		setValidatingDefaults(p)
		if _, err := compileValidating(p, environment.NewExpressions); err != nil {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: %w", p.Name, err))
			continue
		}
		ev, _ := compileValidating(p, environment.StoredExpressions)
		hook := validating.PolicyHook{Policy: p, Evaluator: ev}
		for _, b := range bindings {
			if b.Spec.PolicyName == p.Name {
				b = b.DeepCopy()
				setMatchResourcesDefaults(b.Spec.MatchResources)
				hook.Bindings = append(hook.Bindings, b)
			}
		}
		e.vhooks = append(e.vhooks, hook)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if e.vdispatcher == nil {
		e.vdispatcher = validating.NewDispatcher(offlineAuthorizer, generic.NewPolicyMatcher(matching.NewMatcher(listersv1.NewNamespaceLister(e.namespaces), nil)))
	}
	return nil
}

// ValidatingLen is the number of validating policies.
func (e *Evaluator) ValidatingLen() int { return len(e.vhooks) }

// AdmitPod is MutatePod followed by the validating policies on the mutated pod, as the API
// server admits a CREATE. A refusal is a *Refusal. Offline, the in-tree plugins that run
// before the policies are not reproduced, except the one the policies read: a pod that names
// no service account is judged as the ServiceAccount plugin leaves it ("default"), and the
// returned pod keeps what the policies left.
func (e *Evaluator) AdmitPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	out, err := e.MutatePod(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(e.vhooks) == 0 {
		return out, nil
	}
	judged := out.DeepCopy()
	if judged.Spec.ServiceAccountName == "" {
		judged.Spec.ServiceAccountName = judged.Spec.DeprecatedServiceAccount
	}
	if judged.Spec.ServiceAccountName == "" {
		judged.Spec.ServiceAccountName = "default"
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	attrs := admission.NewAttributesRecord(judged, nil, gvk, judged.Namespace, judged.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, Creator)
	if err := e.vdispatcher.Dispatch(ctx, attrs, e.objects, e.vhooks); err != nil {
		return nil, &Refusal{Err: err}
	}
	return out, nil
}

// AdmitObject runs the validating policies on the CREATE of obj, an object of resource gvr
// (a custom resource: no mutating policy of ours matches one), as the API server does. A
// refusal is a *Refusal.
func (e *Evaluator) AdmitObject(ctx context.Context, obj *unstructured.Unstructured, gvr schema.GroupVersionResource) error {
	if len(e.vhooks) == 0 {
		return nil
	}
	if err := e.knowNamespace(obj.GetNamespace()); err != nil {
		return err
	}
	attrs := admission.NewAttributesRecord(obj, nil, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(),
		gvr, "", admission.Create, &metav1.CreateOptions{}, false, Creator)
	if err := e.vdispatcher.Dispatch(ctx, attrs, e.objects, e.vhooks); err != nil {
		return &Refusal{Err: err}
	}
	return nil
}

// compileValidating builds the validator the API server builds for a stored policy (its
// compilePolicy, policy/validating/plugin.go, is unexported and ignores compile errors, which
// then refuse every request): the same building blocks, with the errors reported.
func compileValidating(p *admissionregistrationv1.ValidatingAdmissionPolicy, mode environment.Type) (validating.Validator, error) {
	if p.Spec.ParamKind != nil {
		return nil, errors.New("spec.paramKind: policies with params are not evaluated offline")
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	msgOpts := plugincel.OptionalVariableDeclarations{}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, fmt.Errorf("CEL compiler: %w", err)
	}
	var errs []error
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, mode)
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
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	vcond := compiler.CompileCondition(validations, opts, mode)
	for _, e := range vcond.CompilationErrors() {
		errs = append(errs, fmt.Errorf("spec.validations: %w", e))
	}
	mcond := compiler.CompileCondition(messages, msgOpts, mode)
	for _, e := range mcond.CompilationErrors() {
		errs = append(errs, fmt.Errorf("spec.validations messageExpression: %w", e))
	}
	audit := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audit[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	acond := compiler.CompileCondition(audit, opts, mode)
	for _, e := range acond.CompilationErrors() {
		errs = append(errs, fmt.Errorf("spec.auditAnnotations: %w", e))
	}
	return validating.NewValidator(vcond, matcher, acond, mcond, p.Spec.FailurePolicy, nil), errors.Join(errs...)
}

func setValidatingDefaults(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	setMatchResourcesDefaults(p.Spec.MatchConstraints)
}
