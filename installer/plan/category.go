package plan

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// CategoryFeasibility is the entry point for `check`: for each run category, can a run with
// the category's scheduling defaults start on this cluster? It evaluates a probe pod per
// category (ProbePod, tiny requests) after placing `before` (e.g. the release's pods from
// PodsFromObjects; nil for none), with the same engine as `plan`. Keys are category names.
func CategoryFeasibility(snap *Snapshot, placement RunPlacement, before []PodToPlace, opts ...Option) map[string]CategoryResult {
	pods := append(append([]PodToPlace(nil), before...), CategoryProbes(placement, "")...)
	res := Plan(snap, pods, opts...)
	out := make(map[string]CategoryResult, len(res.Categories))
	for _, c := range res.Categories {
		out[c.Category] = c
	}
	return out
}

// OK reports whether a run of the category can start now: the probe fits (certainly, or in
// the plan's placement when the outcome depends on scoring).
func (c CategoryResult) OK() bool {
	return c.Result.Verdict == Fits || (c.Result.Verdict == Uncertain && c.Result.AssumedFits)
}

// Feasible lists the nodes where pod fits on the snapshot right now (every filter passes) in
// name order, and otherwise the scheduler-style message. It is the single-pod case of Plan,
// for tests and tools that need the node list.
func Feasible(snap *Snapshot, pod *corev1.Pod) ([]string, string) {
	e := &engine{snap: snap, N: len(snap.Nodes), log: logr.Discard(), cfg: config{poolLabels: DefaultPoolLabels}}
	p := PodToPlace{Name: pod.Name, Pod: pod}
	e.buildClasses([]PodToPlace{p})
	e.buildFree()
	c := e.classes[0]
	var out []string
	for _, n := range c.passes {
		if e.fitsOn(c, int(n)) {
			out = append(out, snap.Nodes[n].Node.Name)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	msg, _ := e.explain(c)
	return nil, msg
}
