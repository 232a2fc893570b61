package plantest

import (
	"fmt"
	"math/rand"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// Outcome is what a scheduler did with one pod of a case.
type Outcome struct {
	Pod   string
	Bound bool
	Node  string
	// Message is the PodScheduled=False message when the pod was not bound.
	Message string
}

// Replay is the plan's verdict for one pod given the real placement of the pods before it:
// plan.Feasible on a snapshot taken just before the pod was created.
type Replay struct {
	Feasible []string
	Message  string
}

// Mismatch is a disagreement between the plan and the scheduler.
type Mismatch struct {
	Case string
	Pod  string
	// Check: "upfront" (planned before the case's pods existed) or "replay".
	Check    string
	Plan     string
	Observed Outcome
}

func (m Mismatch) String() string {
	o := "pending: " + m.Observed.Message
	if m.Observed.Bound {
		o = "bound to " + m.Observed.Node
	}
	return fmt.Sprintf("case %s pod %s (%s): plan said %s, scheduler: %s", m.Case, m.Pod, m.Check, m.Plan, o)
}

// Stats counts what was compared.
type Stats struct {
	Cases, Pods, Bound, Pending int
	// UpfrontFits, UpfrontUnschedulable, UpfrontUncertain count the upfront verdicts.
	UpfrontFits, UpfrontUnschedulable, UpfrontUncertain int
	// UpfrontNodes counts upfront verdicts that named the node (all must match).
	UpfrontNodes int
}

// Add accumulates another case's stats.
func (s *Stats) Add(o Stats) {
	s.Cases += o.Cases
	s.Pods += o.Pods
	s.Bound += o.Bound
	s.Pending += o.Pending
	s.UpfrontFits += o.UpfrontFits
	s.UpfrontUnschedulable += o.UpfrontUnschedulable
	s.UpfrontUncertain += o.UpfrontUncertain
	s.UpfrontNodes += o.UpfrontNodes
}

func (s Stats) String() string {
	return fmt.Sprintf("%d cases, %d pods (%d bound, %d pending); upfront verdicts: %d fits, %d unschedulable, %d uncertain, %d named nodes; replay: every pod",
		s.Cases, s.Pods, s.Bound, s.Pending, s.UpfrontFits, s.UpfrontUnschedulable, s.UpfrontUncertain, s.UpfrontNodes)
}

// Compare checks a case two ways.
//   - upfront: the plan of all the case's pods made before any was created. A "fits" pod must
//     be bound (to Node, when the plan named one), an "unschedulable" pod must stay Pending;
//     "uncertain" allows either (it is counted).
//   - replay: for each pod, the plan on the cluster as it was just before the pod was created
//     (so with the real placement of the earlier pods) must agree exactly: bound iff feasible
//     nodes exist, and bound to one of them.
func Compare(c Case, upfront []plan.PodResult, replay []Replay, got []Outcome) (Stats, []Mismatch) {
	st := Stats{Cases: 1, Pods: len(c.Pods)}
	var bad []Mismatch
	add := func(pod, check, planSaid string, o Outcome) {
		bad = append(bad, Mismatch{Case: c.ID, Pod: pod, Check: check, Plan: planSaid, Observed: o})
	}
	for i, p := range c.Pods {
		if i >= len(got) || got[i].Pod != p.Name {
			add(p.Name, "outcome", "an outcome for every pod, in order", Outcome{Pod: p.Name})
			continue
		}
		o := got[i]
		if o.Bound {
			st.Bound++
		} else {
			st.Pending++
		}
		if i < len(upfront) {
			u := upfront[i]
			switch u.Verdict {
			case plan.Fits:
				st.UpfrontFits++
				if !o.Bound {
					add(p.Name, "upfront", "fits", o)
				}
				if u.Node != "" {
					st.UpfrontNodes++
					if o.Bound && o.Node != u.Node {
						add(p.Name, "upfront", "fits on "+u.Node, o)
					}
				}
			case plan.Unschedulable:
				st.UpfrontUnschedulable++
				if o.Bound {
					add(p.Name, "upfront", "unschedulable: "+u.Message, o)
				}
			default:
				st.UpfrontUncertain++
			}
		} else {
			add(p.Name, "upfront", "a verdict for every pod", o)
		}
		if i < len(replay) {
			r := replay[i]
			switch {
			case len(r.Feasible) == 0 && o.Bound:
				add(p.Name, "replay", "unschedulable: "+r.Message, o)
			case len(r.Feasible) > 0 && !o.Bound:
				add(p.Name, "replay", fmt.Sprintf("fits on %v", r.Feasible), o)
			case o.Bound && !slices.Contains(r.Feasible, o.Node):
				add(p.Name, "replay", fmt.Sprintf("fits only on %v", r.Feasible), o)
			}
		} else {
			add(p.Name, "replay", "a replay verdict for every pod", o)
		}
	}
	return st, bad
}

// Simulate plays a scheduler in memory: pods in order, each on a node choose picks among the
// feasible ones (plan.Feasible on the nodes, the existing pods and the pods placed so far).
// With a random choose it is an adversary for the plan's upfront bounds. It returns the
// outcomes and the replay verdicts.
func Simulate(c Case, choose func(feasible []string) string) ([]Outcome, []Replay) {
	placed := append([]corev1.Pod(nil), c.Existing...)
	var out []Outcome
	var rep []Replay
	for _, p := range c.Pods {
		snap := plan.NewSnapshot(c.Nodes, placed)
		feasible, msg := plan.Feasible(snap, &p)
		rep = append(rep, Replay{Feasible: feasible, Message: msg})
		if len(feasible) == 0 {
			out = append(out, Outcome{Pod: p.Name, Message: msg})
			continue
		}
		n := choose(feasible)
		q := *p.DeepCopy()
		q.Spec.NodeName = n
		placed = append(placed, q)
		out = append(out, Outcome{Pod: p.Name, Bound: true, Node: n})
	}
	return out, rep
}

// RandomChoice picks uniformly with r.
func RandomChoice(r *rand.Rand) func([]string) string {
	return func(f []string) string { return f[r.Intn(len(f))] }
}

// PlanCase is the upfront plan of a case: its pods in order on its nodes and existing pods.
func PlanCase(c Case, snap *plan.Snapshot) []plan.PodResult {
	return PlanCaseResult(c, snap).Pods
}

// PlanCaseResult is PlanCase's whole result, as `plan` prints it.
func PlanCaseResult(c Case, snap *plan.Snapshot) *plan.Result {
	pods := make([]plan.PodToPlace, len(c.Pods))
	for i := range c.Pods {
		pods[i] = plan.PodToPlace{Name: c.Pods[i].Name, Source: plan.SourceRelease, Kind: "Pod", Pod: &c.Pods[i]}
	}
	return plan.Plan(snap, pods)
}

// UncertainShare is the share of upfront verdicts that are uncertain, in percent.
func (s Stats) UncertainShare() float64 {
	if s.Pods == 0 {
		return 0
	}
	return 100 * float64(s.UpfrontUncertain) / float64(s.Pods)
}
