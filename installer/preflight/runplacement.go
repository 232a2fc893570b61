package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// PolicyMinor is the first Kubernetes 1.x that serves admissionregistration.k8s.io/v1
// MutatingAdmissionPolicy by default (GA).
const PolicyMinor = 36

// RunPods is what the release's admission policies make of Polyaxon's run pods.
type RunPods struct {
	// Placed: the release places run pods per category (its MutatingAdmissionPolicies labelled
	// admission.CategoryLabel); whether they are hardened shows in Violations.
	Placed bool
	// Violations are the reasons a run pod as Polyaxon creates it (init and sidecar containers
	// without a securityContext), after the policies, breaks the level; empty when it passes.
	Violations []string
}

// Refused reports whether the level's namespace would refuse run pods.
func (r RunPods) Refused() bool { return len(r.Violations) > 0 }

// EvaluateRunPods runs the rendered admission policies, with the API server's own dispatcher
// (installer/admission), over a run pod of every category as Polyaxon 2.15 creates it, and
// judges the result with the pod-security-admission library at level.
func EvaluateRunPods(objs []runtime.Object, decl *runs.Declaration, namespace, level string) (RunPods, error) {
	lv, err := levelVersion(level)
	if err != nil {
		return RunPods{}, err
	}
	policies, bindings := admission.Policies(objs)
	out := RunPods{Placed: admission.PlacesRuns(policies)}
	var ev *admission.Evaluator
	if len(policies) > 0 {
		if ev, err = admission.New(policies, bindings); err != nil {
			return RunPods{}, fmt.Errorf("the chart's run admission policies: %w", err)
		}
	}
	psa, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return RunPods{}, fmt.Errorf("pod security evaluator: %w", err)
	}
	seen := map[string]bool{}
	runsNS := plan.RunsNamespace(objs, namespace)
	for _, cat := range decl.Names() {
		pod := PolyaxonRunPod(decl, cat, runsNS)
		if ev != nil {
			if pod, err = ev.MutatePod(context.Background(), pod); err != nil {
				return RunPods{}, fmt.Errorf("run category %s: the admission policies refuse its pods: %w", cat, err)
			}
		}
		res := psapolicy.AggregateCheckResults(psa.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
		for i, r := range res.ForbiddenReasons {
			if d := res.ForbiddenDetails[i]; d != "" {
				r += " (" + d + ")"
			}
			if !seen[r] {
				seen[r] = true
				out.Violations = append(out.Violations, r)
			}
		}
	}
	sort.Strings(out.Violations)
	return out, nil
}

// PolyaxonRunPod is the category's probe run pod (runs.Declaration.Pod) with what Polyaxon's
// agent adds to every run: an init container and a sidecar that set no securityContext
// (cli `_k8s/converter`), the containers Pod Security judges.
func PolyaxonRunPod(decl *runs.Declaration, category, namespace string) *corev1.Pod {
	pod := decl.Pod(category, namespace)
	ctx := corev1.VolumeMount{Name: "artifacts-context", MountPath: "/plx-context/artifacts"}
	pod.Spec.InitContainers = []corev1.Container{{Name: "polyaxon-init-auth", Image: "polyaxon/polyaxon-init", Args: []string{"wait", "--auth"}, VolumeMounts: []corev1.VolumeMount{ctx}}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "polyaxon-sidecar", Image: "polyaxon/polyaxon-sidecar", VolumeMounts: []corev1.VolumeMount{ctx}})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: ctx.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return pod
}

// RunsEnforceLevel is the Pod Security level the release namespace can enforce: the
// profile's, unless it is "restricted" and run pods are not hardened to it (no admission
// policies); then "baseline", which Polyaxon's run pods pass, with warn and audit kept at
// "restricted" so every unhardened run pod is still reported.
func RunsEnforceLevel(level string, r RunPods) string {
	if level == string(psaapi.LevelRestricted) && r.Refused() {
		return string(psaapi.LevelBaseline)
	}
	return level
}

// NamespaceLevel is the Pod Security level the release namespace can enforce with this
// rendered release: RunsEnforceLevel over its run pods; the profile's level when the agent is
// off or runs live in a namespace of their own (no runs here), or no level is asked for.
func NamespaceLevel(rendered *render.Result, decl *runs.Declaration, namespace, level string) (string, error) {
	if level == "" || rendered == nil {
		return level, nil
	}
	v, err := chartvalues.Of(rendered.Values)
	if err != nil {
		return "", err
	}
	if !v.Agent.Enabled {
		return level, nil
	}
	objs := rendered.Objects()
	if plan.RunsNamespace(objs, namespace) != namespace {
		// Runs live in a namespace of their own: none runs here.
		return level, nil
	}
	r, err := EvaluateRunPods(objs, decl, namespace, level)
	if err != nil {
		return "", err
	}
	return RunsEnforceLevel(level, r), nil
}

func levelVersion(level string) (psaapi.LevelVersion, error) {
	if level == "" {
		level = string(psaapi.LevelRestricted)
	}
	l, err := psaapi.ParseLevel(level)
	if err != nil {
		return psaapi.LevelVersion{}, fmt.Errorf("pod security level: %w", err)
	}
	return psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()}, nil
}

// checkRunPlacement warns when the API server will not place run pods by category (a cluster
// before 1.36, the kind not served, or runs.admissionPolicies.enabled=false), or not harden
// them to the profile's level (no MutatingAdmissionPolicy, or securityContext.enabled=false).
func (e *Env) checkRunPlacement(ctx context.Context) (string, error) {
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if !v.Agent.Enabled {
		return "", check.Skip("the agent is off: this release starts no runs")
	}
	level := e.Policy.PodSecurityLevel
	r, err := EvaluateRunPods(e.objects(), e.runs(), e.Namespace, level)
	if err != nil {
		return "", err
	}
	if r.Placed && !r.Refused() {
		return fmt.Sprintf("run pods placed per category and hardened to %s by the API server", orDefault(level, "restricted")), nil
	}
	var msg []string
	if !r.Placed {
		msg = append(msg, e.whyNoPolicies(ctx)+": only a run's own environment (nodeSelector, tolerations, affinity) places it, the categories' scheduling does not apply")
	}
	if level == "" {
		return "", check.Warn(errors.New(strings.Join(msg, "; ")))
	}
	if r.Refused() {
		msg = append(msg, fmt.Sprintf("Polyaxon's run pods break %q (%s)", level, strings.Join(r.Violations, "; ")))
		runsNS := plan.RunsNamespace(e.objects(), e.Namespace)
		if enforce := RunsEnforceLevel(level, r); enforce != level && runsNS == e.Namespace {
			msg = append(msg, fmt.Sprintf("install and upgrade label namespace %s pod-security.kubernetes.io/enforce=%s (warn and audit %s) so that runs are admitted", e.Namespace, enforce, level))
		} else if enforce != level {
			msg = append(msg, fmt.Sprintf("the release labels the runs' namespace %s pod-security.kubernetes.io/enforce=%s (warn and audit %s) so that runs are admitted", runsNS, enforce, level))
		} else {
			msg = append(msg, "the namespace would refuse them: enable securityContext (securityContext.enabled=true) or lower the profile's podSecurityLevel")
		}
	}
	return "", check.Warn(errors.New(strings.Join(msg, "; ")))
}

// whyNoPolicies names the reason the rendered release has no run admission policies.
func (e *Env) whyNoPolicies(ctx context.Context) string {
	if v, err := e.chartValues(); err == nil && !v.Runs.AdmissionPolicies.Enabled {
		return "runs.admissionPolicies.enabled is false"
	}
	if v, err := e.version(ctx); err == nil {
		if sv, err := semver.NewVersion(v.GitVersion); err == nil && sv.Major() == 1 && sv.Minor() < PolicyMinor {
			return fmt.Sprintf("Kubernetes %s is older than 1.%d: it has no MutatingAdmissionPolicy", v.GitVersion, PolicyMinor)
		}
		return fmt.Sprintf("the API server (%s) does not serve %s (is it switched off with --runtime-config?)", v.GitVersion, render.MutatingPolicyKinds()[0])
	}
	return "the release has no run admission policies (the cluster does not serve " + render.MutatingPolicyKinds()[0] + ")"
}
