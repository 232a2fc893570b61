package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// components is the chart's component declaration (the embedded chart's when none is given).
func (e *Env) components() contract.Components {
	if e.Chart != nil {
		if c, err := contract.LoadComponents(e.Chart); err == nil {
			return c
		}
	}
	return contract.EmbeddedComponents()
}

// runs is the chart's run-category declaration (the embedded chart's when none is given).
func (e *Env) runs() *runs.Declaration {
	if e.Chart != nil {
		if d, err := runs.Load(e.Chart); err == nil {
			return d
		}
	}
	return runs.Embedded()
}

// Scheduler answers "will it schedule" for the release's pods and for one probe run per run
// category. PlanScheduler (the kube-scheduler's filters via installer/plan) is the default;
// the interface keeps the checks independent of the engine.
type Scheduler interface {
	Evaluate(ctx context.Context, cs kubernetes.Interface, in SchedulingInput) (*SchedulingResult, error)
}

// SchedulingInput is what is placed.
type SchedulingInput struct {
	Namespace string
	Release   string
	// ReleaseLabels select the release's running pods (render.Names.Selector).
	ReleaseLabels map[string]string
	// Objects are the rendered objects (typed where possible).
	Objects []runtime.Object
	// Runs are the chart's run categories.
	Runs *runs.Declaration
}

// SchedulingResult are the verdicts.
type SchedulingResult struct {
	Pods []PodVerdict
	// Categories by run category name; empty when the chart has no runner config.
	Categories map[string]PodVerdict
}

// PodVerdict is one pod's (or probe's) outcome.
type PodVerdict struct {
	Name, Kind, Component, Category string
	Fits                            bool
	// Uncertain: the outcome depends on scoring or on constraints not evaluated.
	Uncertain bool
	Message   string // scheduler-style reason when it does not fit
}

// PlanScheduler evaluates with installer/plan on a snapshot of the cluster (the release's own
// running pods excluded, since the new ones replace them).
type PlanScheduler struct{}

// Evaluate implements Scheduler.
func (PlanScheduler) Evaluate(ctx context.Context, cs kubernetes.Interface, in SchedulingInput) (*SchedulingResult, error) {
	snap, err := plan.LoadSnapshot(ctx, cs, plan.WithExcludedRelease(in.ReleaseLabels))
	if err != nil {
		return nil, fmt.Errorf("reading nodes and pods: %w", err)
	}
	pods, err := plan.PodsFromObjects(in.Objects)
	if err != nil {
		return nil, err
	}
	placement, err := plan.CategoryDefaults(in.Objects, in.Runs, in.Namespace)
	if err != nil && !errors.Is(err, plan.ErrNoPlacementPolicies) { // the run-placement check says so
		return nil, err
	}
	all := append(append([]plan.PodToPlace(nil), pods...), plan.CategoryProbes(placement, in.Namespace)...)
	res := plan.Plan(snap, all)
	out := &SchedulingResult{Categories: map[string]PodVerdict{}}
	for _, p := range res.Pods {
		if p.Source != plan.SourceRelease {
			continue
		}
		out.Pods = append(out.Pods, verdictOf(p))
	}
	for _, c := range res.Categories {
		v := verdictOf(c.Result)
		v.Category = c.Category
		out.Categories[c.Category] = v
	}
	return out, nil
}

func verdictOf(p plan.PodResult) PodVerdict {
	v := PodVerdict{Name: p.Name, Kind: p.Kind, Component: p.Component, Category: p.Category}
	switch p.Verdict {
	case plan.Fits:
		v.Fits = true
	case plan.Uncertain:
		v.Uncertain, v.Fits = true, p.AssumedFits
	}
	v.Message = p.Message
	if v.Message == "" && len(p.Notes) > 0 {
		v.Message = strings.Join(p.Notes, "; ")
	}
	return v
}

// scheduling evaluates once for all scheduling checks.
func (e *Env) scheduling(ctx context.Context) (*SchedulingResult, error) {
	e.once.sched.Do(func() {
		cs, err := e.clientset()
		if err != nil {
			e.schedErr = err
			return
		}
		names, err := e.names()
		if err != nil {
			e.schedErr = err
			return
		}
		e.sched, e.schedErr = e.Scheduler.Evaluate(ctx, cs, SchedulingInput{Namespace: e.Namespace, Release: e.Release, ReleaseLabels: names.Selector,
			Objects: e.objects(), Runs: e.runs()})
	})
	return e.sched, e.schedErr
}

// names are the release's names as the chart renders them with the user's values.
func (e *Env) names() (render.Names, error) {
	var vals map[string]any
	if e.Rendered != nil {
		vals = e.Rendered.Values
	}
	return render.NamesOf(e.Chart, vals, e.Release)
}

// chartValues are the rendered release's values, typed (e.Rendered must be set). They are
// decoded once, when the first check asks: every check reads the same values.
func (e *Env) chartValues() (*chartvalues.Values, error) {
	e.once.values.Do(func() { e.values, e.valuesErr = chartvalues.Of(e.Rendered.Values) })
	return e.values, e.valuesErr
}

// objects returns the rendered objects, typed where the scheme knows the kind.
func (e *Env) objects() []runtime.Object {
	if e.Rendered == nil {
		return nil
	}
	return e.Rendered.Objects()
}

func (e *Env) schedulingChecks() []check.Check {
	hint := "label a Ready node for this pool (kubectl label node NODE polyaxon=<pool>) or change the category's nodeSelectors/tolerations/affinity values; `polyaxon-deploy plan` shows the details"
	runHint := "label Ready nodes with what the category looks for (kubectl label node NODE KEY=VALUE), add the toleration of their taint (tolerations.<category>), or change nodeSelectors.<category>/affinity.<category>; `polyaxon-deploy plan` shows the details"
	checks := []check.Check{
		{ID: "scheduling-core", Category: "scheduling", Description: "every core pod fits a Ready node", Severity: check.Error, Hint: hint,
			Run: e.podsCheck(func(v PodVerdict) bool { return v.Category == "core" })},
		{ID: "scheduling-dependencies", Category: "scheduling", Description: "Postgres, RabbitMQ and Redis pods fit a Ready node", Severity: check.Error, Hint: hint,
			Run: e.podsCheck(func(v PodVerdict) bool { return v.Category != "core" && e.components().IsDependency(v.Component) })},
	}
	for _, cat := range e.runs().Names() {
		cat := cat
		checks = append(checks, check.Check{
			ID: "scheduling-" + cat, Category: "scheduling", Severity: check.Error, Hint: runHint,
			Description: fmt.Sprintf("runs of category %s can start on a Ready node", cat),
			Run: func(ctx context.Context) (string, error) {
				res, err := e.scheduling(ctx)
				if err != nil {
					return "", err
				}
				v, ok := res.Categories[cat]
				if !ok {
					return "", check.Skip("the chart has no runner scheduling for " + cat)
				}
				switch {
				case v.Fits && !v.Uncertain:
					return "", nil
				case v.Fits:
					return "", check.Warnf("may not fit: %s", v.Message)
				}
				return "", errors.New(e.categoryFailure(ctx, cat, orDefault(v.Message, "no Ready node fits")))
			},
		})
	}
	return checks
}

func (e *Env) podsCheck(selected func(PodVerdict) bool) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		res, err := e.scheduling(ctx)
		if err != nil {
			return "", err
		}
		var failed, uncertain []string
		n := 0
		for _, v := range res.Pods {
			if !selected(v) {
				continue
			}
			n++
			line := fmt.Sprintf("%s %s: %s", v.Kind, v.Name, orDefault(v.Message, "does not fit"))
			switch {
			case !v.Fits:
				failed = append(failed, line)
			case v.Uncertain:
				uncertain = append(uncertain, line)
			}
		}
		if n == 0 {
			return "", check.Skip("no such pods in the release")
		}
		if len(failed) > 0 {
			return "", joinErrs(failed, 10)
		}
		if len(uncertain) > 0 {
			return "", check.Warn(joinErrs(uncertain, 10))
		}
		return fmt.Sprintf("%d pods fit", n), nil
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// isGPU recognises GPU extended resources (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915).
func isGPU(name corev1.ResourceName) bool {
	return strings.Contains(strings.ToLower(string(name)), "gpu") || strings.HasSuffix(string(name), "/i915")
}

// fitsNode is the scheduler's label and taint filters (component-helpers), nothing else.
func fitsNode(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false
	}
	_, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}

// checkGPU: where the release or the values ask for GPUs, Ready nodes that the pods may use
// must advertise them. Run categories that tolerate a GPU taint are a guess: they only warn.
func (e *Env) checkGPU(ctx context.Context) (string, error) {
	type ask struct {
		what string
		pod  *corev1.Pod
		res  corev1.ResourceName
		qty  resource.Quantity
	}
	var asks []ask
	for _, o := range e.objects() {
		name, pod := podOf(o)
		if pod == nil {
			continue
		}
		for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			for r, q := range mergedRequests(c.Resources) {
				if isGPU(r) && !q.IsZero() {
					asks = append(asks, ask{what: name, pod: pod, res: r, qty: q})
				}
			}
		}
	}
	// Values asking for GPUs outside rendered pods (e.g. run defaults): any node will do.
	if e.Rendered != nil {
		for _, r := range gpuInValues(e.Rendered.Values, "") {
			asks = append(asks, ask{what: "values " + r.path, pod: &corev1.Pod{}, res: r.name, qty: r.qty})
		}
	}
	var guesses []string
	if placement, err := plan.CategoryDefaults(e.objects(), e.runs(), e.Namespace); err == nil {
		for _, d := range placement.Categories {
			cat := d.Category
			for _, t := range d.Tolerations {
				if strings.Contains(strings.ToLower(t.Key), "gpu") {
					guesses = append(guesses, cat)
					asks = append(asks, ask{what: "category " + cat, pod: &corev1.Pod{Spec: corev1.PodSpec{
						NodeSelector: d.NodeSelector, Tolerations: d.Tolerations, Affinity: d.Affinity}}})
					break
				}
			}
		}
	}
	if len(asks) == 0 {
		return "", check.Skip("no pod, value or run category asks for GPUs")
	}
	nodes, err := e.readyNodes(ctx)
	if err != nil {
		return "", err
	}
	var failures, warnings, ok []string
	for _, a := range asks {
		found := ""
		for i := range nodes {
			n := &nodes[i]
			if !fitsNode(a.pod, n) {
				continue
			}
			if a.res == "" { // a guess: any GPU resource
				for r, q := range n.Status.Allocatable {
					if isGPU(r) && !q.IsZero() {
						found = n.Name
					}
				}
			} else if q, has := n.Status.Allocatable[a.res]; has && q.Cmp(a.qty) >= 0 {
				found = n.Name
			}
			if found != "" {
				break
			}
		}
		switch {
		case found != "":
			ok = append(ok, a.what)
		case a.res == "":
			warnings = append(warnings, fmt.Sprintf("%s tolerates a GPU taint but no Ready node it may use advertises a GPU", a.what))
		default:
			failures = append(failures, fmt.Sprintf("%s asks for %s %s but no Ready node it may use has that much allocatable", a.what, a.qty.String(), a.res))
		}
	}
	if len(failures) > 0 {
		return "", joinErrs(append(failures, warnings...), 10)
	}
	if len(warnings) > 0 {
		return "", check.Warn(joinErrs(warnings, 10))
	}
	sort.Strings(ok)
	return "GPUs available for " + strings.Join(ok, ", "), nil
}

func mergedRequests(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range r.Limits {
		out[k] = v
	}
	for k, v := range r.Requests {
		out[k] = v
	}
	return out
}

type valueGPU struct {
	path string
	name corev1.ResourceName
	qty  resource.Quantity
}

// gpuInValues finds GPU quantities under any resources.{requests,limits} map in values.
func gpuInValues(v any, path string) []valueGPU {
	var out []valueGPU
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		p := strings.TrimPrefix(path+"."+k, ".")
		if (k == "requests" || k == "limits") && strings.HasSuffix(path, "resources") {
			if rl, ok := m[k].(map[string]any); ok {
				for name, q := range rl {
					if !isGPU(corev1.ResourceName(name)) {
						continue
					}
					qty, err := resource.ParseQuantity(fmt.Sprint(q))
					if err == nil && !qty.IsZero() {
						out = append(out, valueGPU{path: p + "." + name, name: corev1.ResourceName(name), qty: qty})
					}
				}
			}
			continue
		}
		out = append(out, gpuInValues(m[k], p)...)
	}
	return out
}
