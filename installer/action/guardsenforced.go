package action

// The runs' restrictions in force after a first install. The API server enforces a new
// ValidatingAdmissionPolicy only once its policy informer has seen the policy and its binding,
// a moment after they were created and not always before the install's wait ends: a run pod
// created in that moment is admitted unchecked (seen in the e2e tests: a build that named no
// pool, admitted right after the install). So the install asks the API server, by a dry run,
// to create a pod the restrictions refuse, until it is refused by them.

import (
	"context"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

var (
	// guardsEnforcedWait bounds the wait; past it the install warns and goes on.
	guardsEnforcedWait = 2 * time.Minute
	guardsProbeEvery   = time.Second
)

// guardProbeSecret is a Secret no run may reference: the restrictions refuse a pod naming it.
const guardProbeSecret = "polyaxon-deploy-guard-probe"

// runsGuardsEnforced waits until the API server refuses, by the rendered runs' restrictions
// policy, a run pod that references a Secret runs may not use.
func (e *Env) runsGuardsEnforced(ctx context.Context, cs kubernetes.Interface, rendered *render.Result) {
	policy := renderedRunsRestrictions(rendered)
	if policy == nil || cs == nil {
		return
	}
	namespace := policy.Spec.MatchConstraints.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
	if namespace == "" {
		return
	}
	probe := guardProbePod()
	began := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, guardsProbeEvery, guardsEnforcedWait, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			last = "admitted"
			return false, nil
		}
		last = err.Error()
		return strings.Contains(last, policy.Name), nil
	})
	if err != nil {
		e.progress().Warn("the API server does not enforce the runs' ValidatingAdmissionPolicy " + policy.Name + " yet (a run pod that references a Secret runs may not use: " + last +
			"): a run submitted now may be admitted unchecked; polyaxon-deploy check shows when it is (check-run-guards)")
		return
	}
	e.debugf("runs' restrictions %s enforced after %s", policy.Name, time.Since(began).Round(time.Millisecond))
}

// guardProbePod is a run pod the restricted Pod Security level admits and the runs'
// restrictions refuse: it loads guardProbeSecret. Only ever created as a dry run.
func guardProbePod() *corev1.Pod {
	no, yes := false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-deploy-guard-probe", Labels: map[string]string{
			"app.kubernetes.io/part-of": "polyaxon-runs", "app.kubernetes.io/managed-by": "polyaxon-deploy",
		}},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: "polyaxon-deploy/guard-probe", Command: []string{"true"},
				EnvFrom:         []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: guardProbeSecret}}}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// renderedRunsRestrictions is the rendered runs' restrictions policy (runs/validatingadmissionpolicy.yaml).
func renderedRunsRestrictions(rendered *render.Result) *admissionregistrationv1.ValidatingAdmissionPolicy {
	for _, m := range rendered.Manifests {
		if p, ok := m.Typed.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && strings.HasSuffix(p.Name, "-runs-restrictions") &&
			p.Spec.MatchConstraints != nil && p.Spec.MatchConstraints.NamespaceSelector != nil {
			return p
		}
	}
	return nil
}
