package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func noNodeName(expr string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-node-name"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expr, MessageExpression: `"spec.nodeName: " + object.spec.nodeName + " is not allowed"`}},
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-node-name"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-node-name",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	return p, b
}

func TestAdmitPodRunsTheValidatingPolicies(t *testing.T) {
	ev, err := New(nil, nil)
	require.NoError(t, err)
	p, b := noNodeName(`object.spec.?nodeName.orValue("") == ""`)
	require.NoError(t, ev.AddValidating([]*admissionregistrationv1.ValidatingAdmissionPolicy{p}, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{b}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	_, err = ev.AdmitPod(context.Background(), pod)
	require.NoError(t, err)

	pod.Spec.NodeName = "core-0"
	_, err = ev.AdmitPod(context.Background(), pod)
	require.Error(t, err)
	assert.True(t, IsRefusal(err))
	assert.Equal(t, `pods "p" is forbidden: ValidatingAdmissionPolicy 'no-node-name' with binding 'no-node-name' denied request: spec.nodeName: core-0 is not allowed`, err.Error())
	got, err := ev.MutatePod(context.Background(), pod)
	require.NoError(t, err, "MutatePod runs the mutating policies only")
	assert.Equal(t, "core-0", got.Spec.NodeName)
}

func TestAddValidatingRefusesACELError(t *testing.T) {
	ev, err := New(nil, nil)
	require.NoError(t, err)
	p, b := noNodeName(`object.spec.nodeName == `)
	err = ev.AddValidating([]*admissionregistrationv1.ValidatingAdmissionPolicy{p}, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{b})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy no-node-name: spec.validations")
	assert.False(t, IsRefusal(err))
}
