package admission

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Evaluator runs the API server's mutating-policy dispatcher over a fixed set of policies.
type Evaluator struct {
	hooks      []mutating.PolicyHook
	dispatcher generic.Dispatcher[mutating.PolicyHook]
	objects    admission.ObjectInterfaces
	namespaces cache.Indexer

	vhooks      []validating.PolicyHook
	vdispatcher generic.Dispatcher[validating.PolicyHook]
}

// Policies picks the MutatingAdmissionPolicies and their bindings out of rendered objects.
func Policies(objs []runtime.Object) ([]*admissionregistrationv1.MutatingAdmissionPolicy, []*admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	var ps []*admissionregistrationv1.MutatingAdmissionPolicy
	var bs []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, o := range objs {
		switch t := o.(type) {
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			ps = append(ps, t)
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			bs = append(bs, t)
		}
	}
	return ps, bs
}

// CategoryLabel marks the chart's MutatingAdmissionPolicies that place a run category's pods
// (the hardening policy, which every run pod gets, has none).
const CategoryLabel = "polyaxon-deploy/run-category"

// PlacesRuns reports whether any of policies places runs by category.
func PlacesRuns(policies []*admissionregistrationv1.MutatingAdmissionPolicy) bool {
	for _, p := range policies {
		if p.Labels[CategoryLabel] != "" {
			return true
		}
	}
	return false
}

// New compiles the policies. A CEL error fails, as the API server would refuse the policy.
func New(policies []*admissionregistrationv1.MutatingAdmissionPolicy, bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding) (*Evaluator, error) {
	var hooks []mutating.PolicyHook
	var errs []error
	for _, p := range policies {
		p = p.DeepCopy()
		setPolicyDefaults(p)
		if _, err := compile(p, environment.NewExpressions); err != nil {
			errs = append(errs, fmt.Errorf("MutatingAdmissionPolicy %s: %w", p.Name, err))
			continue
		}
		ev, _ := compile(p, environment.StoredExpressions)
		hook := mutating.PolicyHook{Policy: p, Evaluator: ev}
		for _, b := range bindings {
			if b.Spec.PolicyName == p.Name {
				b = b.DeepCopy()
				setBindingDefaults(b)
				hook.Bindings = append(hook.Bindings, b)
			}
		}
		hooks = append(hooks, hook)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	nsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	return &Evaluator{
		hooks:      hooks,
		dispatcher: mutating.NewDispatcher(offlineAuthorizer, matching.NewMatcher(listersv1.NewNamespaceLister(nsIndex), nil), staticTypeConverters{applyconfigurations.NewTypeConverter(scheme.Scheme)}),
		objects:    admission.NewObjectInterfacesFromScheme(scheme.Scheme),
		namespaces: nsIndex,
	}, nil
}

// Len is the number of policies.
func (e *Evaluator) Len() int { return len(e.hooks) }

// Creator is who creates run pods: the controllers that own them (jobs, deployments) act as
// the kube-controller-manager's service accounts; none of our policies looks at it.
var Creator user.Info = &user.DefaultInfo{Name: "system:serviceaccount:kube-system:job-controller"}

// MutatePod returns the pod as the policies leave it on CREATE. The input is not modified.
func (e *Evaluator) MutatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	pod.SetGroupVersionKind(gvk)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if err := e.knowNamespace(pod.Namespace); err != nil {
		return nil, err
	}
	attrs := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, Creator)
	if err := e.dispatcher.Dispatch(ctx, attrs, e.objects, e.hooks); err != nil {
		return nil, err
	}
	// The server runs the mutating chain once more when a policy asks for it (IfNeeded).
	if rc := attrs.GetReinvocationContext(); rc.ShouldReinvoke() {
		rc.SetIsReinvoke()
		if err := e.dispatcher.Dispatch(ctx, attrs, e.objects, e.hooks); err != nil {
			return nil, fmt.Errorf("reinvocation: %w", err)
		}
	}
	out := attrs.GetObject().(*corev1.Pod)
	out.SetGroupVersionKind(gvk)
	return out, nil
}

// Offline there is no one to ask: CEL `authorizer` checks answer "no opinion".
var offlineAuthorizer = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "offline evaluation has no authorizer", nil
})

// staticTypeConverters serves the built-in types' schema compiled into client-go; the API
// server serves the same from its /openapi/v3.
type staticTypeConverters struct{ tc managedfields.TypeConverter }

func (s staticTypeConverters) GetTypeConverter(schema.GroupVersionKind) managedfields.TypeConverter {
	return s.tc
}
func (staticTypeConverters) Run(context.Context) {}

var _ patch.TypeConverterManager = staticTypeConverters{}

// knowNamespace adds namespace to what the policies' namespace selectors see, labelled with its
// name as the API server labels every namespace.
func (e *Evaluator) knowNamespace(namespace string) error {
	if _, ok, _ := e.namespaces.GetByKey(namespace); ok {
		return nil
	}
	return e.namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{corev1.LabelMetadataName: namespace}}})
}
