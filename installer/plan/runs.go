package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// CategoryScheduling is where a run of one category is placed: what the chart's admission
// policies give a run that sets no scheduling of its own.
type CategoryScheduling struct {
	Category     string              `json:"category"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	// Refused is why the API server refuses the category's run pods (a ValidatingAdmissionPolicy
	// of the chart: e.g. the category's placement targets a protected category's nodes).
	Refused string `json:"refused,omitempty"`
}

// String is a compact one-line description.
func (c CategoryScheduling) String() string {
	var parts []string
	if len(c.NodeSelector) > 0 {
		parts = append(parts, "nodeSelector "+selectorText(c.NodeSelector))
	}
	if len(c.Tolerations) > 0 {
		var ts []string
		for _, t := range c.Tolerations {
			ts = append(ts, tolerationText(t))
		}
		parts = append(parts, "tolerations ["+strings.Join(ts, ", ")+"]")
	}
	if c.Affinity != nil && c.Affinity.NodeAffinity != nil && c.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		parts = append(parts, "required node affinity "+nodeSelectorText(c.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
	} else if c.Affinity != nil {
		parts = append(parts, "affinity (preferred only)")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// RunPlacement is the scheduling of every run category, in the chart's declaration order.
type RunPlacement struct {
	Categories []CategoryScheduling
	// Enforced is false when the release has no placement policies (a cluster before
	// Kubernetes 1.36, or runs.admissionPolicies.enabled=false): runs then go wherever their
	// own environment says, and the categories carry no scheduling.
	Enforced bool
}

// Get returns a category's scheduling.
func (r RunPlacement) Get(category string) (CategoryScheduling, bool) {
	for _, c := range r.Categories {
		if c.Category == category {
			return c, true
		}
	}
	return CategoryScheduling{}, false
}

// Names lists the categories in order.
func (r RunPlacement) Names() []string {
	out := make([]string, len(r.Categories))
	for i, c := range r.Categories {
		out[i] = c.Category
	}
	return out
}

// ErrNoPlacementPolicies: the rendered release places no run by category.
var ErrNoPlacementPolicies = errors.New("the release has no run placement policies (MutatingAdmissionPolicy needs Kubernetes 1.36 or later, and runs.admissionPolicies.enabled)")

// CategoryDefaults asks the rendered release's admission policies where a run of each category
// goes: it evaluates them, with the API server's own code (installer/admission), on a run pod of
// the category as Polyaxon creates it (runs.Declaration.Pod). Without placement policies every
// category is unconstrained, still judged by the validating policies (a category whose runs
// must name a pool is refused), and the error is ErrNoPlacementPolicies. The pods are sent to the release's
// runs namespace (RunsNamespace), release namespace when it has none of its own.
func CategoryDefaults(objs []runtime.Object, decl *runs.Declaration, namespace string) (RunPlacement, error) {
	typed := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		t, err := admissionTyped(o)
		if err != nil {
			return RunPlacement{}, err
		}
		if t != nil {
			typed = append(typed, t)
		}
	}
	policies, bindings := admission.Policies(typed)
	out := RunPlacement{Enforced: admission.PlacesRuns(policies)}
	ev, err := admission.New(policies, bindings)
	if err != nil {
		return RunPlacement{}, fmt.Errorf("the chart's run admission policies: %w", err)
	}
	if namespace = RunsNamespace(objs, namespace); namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	if err := ev.AddValidating(admission.ValidatingPolicies(typed)); err != nil {
		return RunPlacement{}, fmt.Errorf("the chart's run admission policies: %w", err)
	}
	sa := runsServiceAccount(objs)
	for _, name := range decl.Names() {
		sent := decl.Pod(name, namespace)
		sent.Spec.ServiceAccountName = sa
		pod, err := ev.MutatePod(context.Background(), sent)
		if err != nil {
			return RunPlacement{}, fmt.Errorf("run category %s: the admission policies refuse its pods: %w", name, err)
		}
		cs := CategoryScheduling{
			Category:     name,
			NodeSelector: pod.Spec.NodeSelector,
			Tolerations:  pod.Spec.Tolerations,
			Affinity:     pod.Spec.Affinity,
		}
		if _, err := ev.AdmitPod(context.Background(), sent); admission.IsRefusal(err) {
			cs.Refused = err.Error()
		} else if err != nil {
			return RunPlacement{}, fmt.Errorf("run category %s: %w", name, err)
		}
		out.Categories = append(out.Categories, cs)
	}
	if !out.Enforced {
		return out, ErrNoPlacementPolicies
	}
	return out, nil
}

// runsServiceAccount is the account Polyaxon gives every run: the agent's POLYAXON_AGENT_RUNS_SA
// in the rendered ConfigMaps; empty when the chart sets none (the pod then names none).
func runsServiceAccount(objs []runtime.Object) string {
	return agentSetting(objs, "POLYAXON_AGENT_RUNS_SA")
}

// RunsNamespace is the namespace the rendered release sends runs to (the agent's
// POLYAXON_K8S_NAMESPACE, runs.namespace in the values), or release when it sets none.
func RunsNamespace(objs []runtime.Object, release string) string {
	if ns := agentSetting(objs, "POLYAXON_K8S_NAMESPACE"); ns != "" {
		return ns
	}
	return release
}

// agentSetting is the first non-empty value of key in the rendered ConfigMaps.
func agentSetting(objs []runtime.Object, key string) string {
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind != "ConfigMap" {
			continue
		}
		switch t := o.(type) {
		case *corev1.ConfigMap:
			if v := t.Data[key]; v != "" {
				return v
			}
		case interface{ UnstructuredContent() map[string]any }:
			if data, ok := t.UnstructuredContent()["data"].(map[string]any); ok {
				if v, ok := data[key].(string); ok && v != "" {
					return v
				}
			}
		}
	}
	return ""
}

// admissionTyped decodes rendered Mutating and ValidatingAdmissionPolicies and their bindings; other objects
// are skipped (nil).
func admissionTyped(o runtime.Object) (runtime.Object, error) {
	u, ok := o.(interface{ UnstructuredContent() map[string]any })
	if !ok {
		return o, nil
	}
	gvk := o.GetObjectKind().GroupVersionKind()
	if gvk.Group != "admissionregistration.k8s.io" || !(strings.HasPrefix(gvk.Kind, "MutatingAdmissionPolicy") || strings.HasPrefix(gvk.Kind, "ValidatingAdmissionPolicy")) {
		return nil, nil
	}
	target, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.UnstructuredContent(), target, true); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", gvk.Kind, err)
	}
	return target, nil
}

// ProbePod is a pod with a category's scheduling defaults and ProbeRequests; it passes the
// restricted Pod Security Standard so it can run as a canary in the release's namespace.
func ProbePod(cs CategoryScheduling, namespace string) *corev1.Pod {
	no, yes := false, true
	uid := int64(65534)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "polyaxon-canary-" + cs.Category + "-",
			Namespace:    namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "polyaxon-deploy-canary",
				"app.kubernetes.io/managed-by": "polyaxon-deploy",
				"polyaxon-deploy/category":     cs.Category,
			},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  copyMap(cs.NodeSelector),
			Tolerations:                   append([]corev1.Toleration(nil), cs.Tolerations...),
			Affinity:                      cs.Affinity.DeepCopy(),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "canary",
				Image: CanaryImage,
				Resources: corev1.ResourceRequirements{
					Requests: runs.ProbeRequests.DeepCopy(),
					Limits:   runs.ProbeRequests.DeepCopy(),
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// CanaryImage is the image of canary pods; they only need to be scheduled.
var CanaryImage = "registry.k8s.io/pause:3.10"

// CategoryProbes turns the run placement into hypothetical pods, one per category, in order.
func CategoryProbes(placement RunPlacement, namespace string) []PodToPlace {
	var out []PodToPlace
	for _, cs := range placement.Categories {
		p := ProbePod(cs, namespace)
		p.Name = "probe-" + cs.Category
		out = append(out, PodToPlace{Name: "probe-" + cs.Category, Source: SourceCategory, Kind: "Pod", Category: cs.Category, Pod: p, Hypothetical: true, Refused: cs.Refused})
	}
	return out
}
