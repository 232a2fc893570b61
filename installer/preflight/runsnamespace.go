package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// The components of ours that live in the runs' namespace; anything else of a Polyaxon
// release found there is the platform's.
var runsNamespaceComponents = []string{"runs", "artifacts", "agent", "operator", "gateway"}

// checkRunsNamespace: runs live apart from the platform when the profile asks for it, and the
// namespace they go to holds nothing of a platform (a run there could mount or read it) and is
// this release's to create.
func (e *Env) checkRunsNamespace(ctx context.Context) (string, error) {
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
	runsNS := plan.RunsNamespace(e.objects(), e.Namespace)
	if runsNS == e.Namespace {
		if e.Policy.OwnRunsNamespace {
			return "", fmt.Errorf("runs.namespace is %q, the release's own namespace: the profile keeps runs apart from the platform's Secrets, volumes and accounts; set runs.namespace to a namespace of their own (e.g. %s-runs)", runsNS, e.Namespace)
		}
		return fmt.Sprintf("runs share namespace %s with the platform (the profile does not ask for a namespace of their own)", runsNS), nil
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	left, err := e.runsLeftBehind(ctx)
	if err != nil {
		return "", err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, runsNS, metav1.GetOptions{})
	if isNotFound(err) {
		if left != "" {
			return "", check.Warnf("%s", left)
		}
		return fmt.Sprintf("namespace %s does not exist yet: the release creates it for runs", runsNS), nil
	}
	if err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", runsNS, err)
	}
	var found []string
	releases, err := cs.CoreV1().Secrets(runsNS).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return "", fmt.Errorf("listing Helm releases in namespace %s: %w", runsNS, err)
	}
	for _, s := range releases.Items {
		found = append(found, "Helm release "+s.Labels["name"])
	}
	platform := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=polyaxon"}
	mine := func(labels map[string]string) bool {
		return labels["app.kubernetes.io/instance"] == e.Release && slices.Contains(runsNamespaceComponents, labels["app.kubernetes.io/component"])
	}
	secrets, err := cs.CoreV1().Secrets(runsNS).List(ctx, platform)
	if err != nil {
		return "", fmt.Errorf("listing Secrets in namespace %s: %w", runsNS, err)
	}
	for _, s := range secrets.Items {
		found = append(found, "Secret "+s.Name)
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(runsNS).List(ctx, platform)
	if err != nil {
		return "", fmt.Errorf("listing claims in namespace %s: %w", runsNS, err)
	}
	for _, c := range claims.Items {
		if !mine(c.Labels) {
			found = append(found, "PersistentVolumeClaim "+c.Name)
		}
	}
	pods, err := cs.CoreV1().Pods(runsNS).List(ctx, platform)
	if err != nil {
		return "", fmt.Errorf("listing pods in namespace %s: %w", runsNS, err)
	}
	for _, p := range pods.Items {
		found = append(found, "Pod "+p.Name)
	}
	if len(found) > 0 {
		if len(found) > 5 {
			found = append(found[:5], fmt.Sprintf("and %d more", len(found)-5))
		}
		return "", fmt.Errorf("namespace %s (runs.namespace) holds a platform's objects (%s): runs there could mount or read them; set runs.namespace to a namespace of their own", runsNS, strings.Join(found, ", "))
	}
	if e.createsNamespace(runsNS) {
		a := ns.Annotations
		if a["meta.helm.sh/release-name"] != e.Release || a["meta.helm.sh/release-namespace"] != e.Namespace {
			return "", fmt.Errorf("namespace %s exists and is not this release's, so the release cannot create it: set runs.createNamespace=false and label it pod-security.kubernetes.io/enforce=restricted yourself, or choose another runs.namespace", runsNS)
		}
		if left != "" {
			return "", check.Warnf("%s", left)
		}
		return fmt.Sprintf("runs go to namespace %s, which the release owns and which holds nothing of the platform's", runsNS), nil
	}
	if left != "" {
		return "", check.Warnf("%s", left)
	}
	if level := ns.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		return "", check.Warnf("namespace %s (runs.createNamespace=false) enforces Pod Security %q: label it pod-security.kubernetes.io/enforce=restricted", runsNS, orDefault(level, "none"))
	}
	return fmt.Sprintf("runs go to namespace %s, which holds nothing of the platform's", runsNS), nil
}

// createsNamespace reports whether the rendered release has the Namespace name.
func (e *Env) createsNamespace(name string) bool {
	for _, m := range e.manifests() {
		if m.Kind() == "Namespace" && m.Name() == name {
			return true
		}
	}
	return false
}

// runObjects are the objects the agent creates for runs (polyaxon.com/v1).
var runObjects = []string{"jobs", "services", "kfjobs", "clusters"}

// runsLeftBehind says what an upgrade leaves in the release namespace when runs move to a
// namespace of their own: the run objects created there before, which the operator no longer
// watches. Empty when there are none (or the kinds are not served yet).
func (e *Env) runsLeftBehind(ctx context.Context) (string, error) {
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return "", err
	}
	n := 0
	for _, r := range runObjects {
		gvr := schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: r}
		list, err := dyn.Resource(gvr).Namespace(e.Namespace).List(ctx, metav1.ListOptions{})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("listing %s in namespace %s: %w", gvr.GroupResource(), e.Namespace, err)
		}
		n += len(list.Items)
	}
	if n == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d run object(s) in namespace %s were made before runs.namespace: new runs go to %s; finished runs stay visible in the API, but no runner watches these any more, so a run still running there stays running in the API whatever it does; stop it (`polyaxon ops stop`) or let it finish before the upgrade. Stopped after it, the run ends in the API but its pods stay until its object is deleted (kubectl -n %s delete jobs.polyaxon.com,services.polyaxon.com,kfjobs.polyaxon.com,clusters.polyaxon.com NAME)",
		n, e.Namespace, plan.RunsNamespace(e.objects(), e.Namespace), e.Namespace), nil
}
