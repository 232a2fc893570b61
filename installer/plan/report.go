package plan

// The report: the cluster's pools, run categories, topologies grouped into replica runs with
// what they miss, and the summary.

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

func schedulingOf(pods []PodToPlace, name string) string {
	for i := range pods {
		if pods[i].Name == name && pods[i].Source == SourceCategory {
			s := pods[i].Pod.Spec
			return CategoryScheduling{Category: pods[i].Category, NodeSelector: s.NodeSelector, Tolerations: s.Tolerations, Affinity: s.Affinity}.String()
		}
	}
	return ""
}

func (e *engine) clusterSummary() ClusterSummary {
	s := ClusterSummary{Nodes: e.N, ExistingPods: e.snap.ExistingPods, APICalls: e.snap.APICalls, Pools: []PoolSummary{}}
	type sums struct {
		nodes       int
		alloc, free map[corev1.ResourceName]int64
	}
	by := map[int32]*sums{}
	for n, ni := range e.snap.Nodes {
		if ni.Ready {
			s.ReadyNodes++
		}
		if ni.Node.Spec.Unschedulable {
			s.UnschedulableNodes++
		}
		ps := by[e.poolOf[n]]
		if ps == nil {
			ps = &sums{alloc: map[corev1.ResourceName]int64{}, free: map[corev1.ResourceName]int64{}}
			by[e.poolOf[n]] = ps
		}
		ps.nodes++
		add := func(name corev1.ResourceName, a, r int64) {
			ps.alloc[name] += a
			ps.free[name] += a - r
		}
		add(corev1.ResourceCPU, ni.Allocatable.MilliCPU, ni.Requested.MilliCPU)
		add(corev1.ResourceMemory, ni.Allocatable.Memory, ni.Requested.Memory)
		add(corev1.ResourcePods, ni.Allocatable.AllowedPods, int64(ni.Pods))
		for name, v := range ni.Allocatable.Scalar {
			if !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				add(name, v, ni.Requested.Scalar[name])
			}
		}
	}
	for id, ps := range by {
		p := PoolSummary{Pool: e.pools[id], Nodes: ps.nodes, Allocatable: map[string]string{}, Free: map[string]string{}}
		for name, v := range ps.alloc {
			p.Allocatable[string(name)] = amountText(name, v)
			p.Free[string(name)] = amountText(name, ps.free[name])
		}
		s.Pools = append(s.Pools, p)
	}
	sort.Slice(s.Pools, func(i, j int) bool { return s.Pools[i].Pool < s.Pools[j].Pool })
	return s
}

func summarize(r *Result) Summary {
	var s Summary
	count := func(p PodResult) {
		s.Pods++
		switch p.Verdict {
		case Fits:
			s.Fits++
		case Unschedulable:
			s.Unschedulable++
		case Uncertain:
			s.Uncertain++
			if p.AssumedFits {
				s.Warnings++
			}
		}
	}
	for _, p := range r.Pods {
		count(p)
	}
	for _, c := range r.Categories {
		count(c.Result)
	}
	s.OK = s.Unschedulable == 0 && s.Uncertain == s.Warnings
	return s
}

// topologyResults groups each topology's replicas into runs of consecutive indexes of one role
// with the same outcome.
func topologyResults(pods []PodToPlace, results []PodResult) []TopologyResult {
	type acc struct {
		TopologyResult
		groups []*groupBuilder
	}
	var out []*acc
	byOwner := map[string]*acc{}
	byName := map[string]*PodToPlace{}
	for i := range pods {
		if pods[i].Source == SourceTopology {
			byName[pods[i].Owner+"/"+pods[i].Name] = &pods[i]
		}
	}
	for i := range results {
		r := &results[i]
		if r.Source != SourceTopology {
			continue
		}
		t := byOwner[r.Owner]
		if t == nil {
			t = &acc{TopologyResult: TopologyResult{Name: r.Owner, Verdict: Fits, AssumedFits: true}}
			if pp := byName[r.Owner+"/"+r.Name]; pp != nil {
				t.Framework = pp.framework
			}
			byOwner[r.Owner] = t
			out = append(out, t)
		}
		t.Replicas++
		if !r.AssumedFits {
			t.AssumedFits = false
		}
		switch {
		case r.Verdict == Unschedulable:
			t.Verdict = Unschedulable
		case r.Verdict == Uncertain && t.Verdict == Fits:
			t.Verdict = Uncertain
		}
		if n := len(t.groups); n > 0 {
			g := t.groups[n-1]
			if g.Role == r.Role && g.Verdict == r.Verdict && g.AssumedFits == r.AssumedFits && g.Message == r.Message && r.Index == g.lastIndex+1 {
				g.indexes = append(g.indexes, r.Index)
				g.lastIndex = r.Index
				g.Count++
				g.addPool(r)
				continue
			}
		}
		g := &groupBuilder{ReplicaGroup: ReplicaGroup{Role: r.Role, Count: 1, Verdict: r.Verdict, AssumedFits: r.AssumedFits, Message: r.Message},
			indexes: []int{r.Index}, lastIndex: r.Index, first: byName[r.Owner+"/"+r.Name], firstResult: r}
		g.addPool(r)
		t.groups = append(t.groups, g)
	}
	final := make([]TopologyResult, 0, len(out))
	for _, t := range out {
		tr := t.TopologyResult
		for _, g := range t.groups {
			rg := g.ReplicaGroup
			rg.Indexes = indexRanges(g.indexes)
			rg.Pools = g.pools()
			tr.Groups = append(tr.Groups, rg)
			if !g.AssumedFits || g.Verdict == Unschedulable {
				tr.Missing = append(tr.Missing, missingText(g))
			}
		}
		final = append(final, tr)
	}
	return final
}

type groupBuilder struct {
	ReplicaGroup
	indexes     []int
	lastIndex   int
	poolCount   map[string]int
	first       *PodToPlace
	firstResult *PodResult
}

// addPool counts where the plan put the replica.
func (g *groupBuilder) addPool(r *PodResult) {
	if !r.AssumedFits {
		return
	}
	if g.poolCount == nil {
		g.poolCount = map[string]int{}
	}
	g.poolCount[r.Pool]++
}

func (g *groupBuilder) pools() []PoolCount {
	var out []PoolCount
	for p, n := range g.poolCount {
		out = append(out, PoolCount{Pool: p, Nodes: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// missingText says what a group of replicas that does not fit lacks, e.g. "worker 5-6: need 2
// more nodes with 1 free nvidia.com/gpu matching polyaxon=gpu-nodes".
func missingText(g *groupBuilder) string {
	head := fmt.Sprintf("%s %s", g.Role, indexRanges(g.indexes))
	where := ""
	if g.first != nil {
		if c := constraintsText(g.first.Pod); c != "" {
			where = " matching " + c
		}
	}
	r := g.firstResult
	var short []string
	staticOnly := true
	for _, reason := range r.Reasons {
		switch {
		case strings.HasPrefix(reason.Reason, "Insufficient "):
			name := strings.TrimPrefix(reason.Reason, "Insufficient ")
			short = appendOnce(short, fmt.Sprintf("%s free %s", r.Requests[name], name))
			staticOnly = false
		case reason.Reason == reasonTooManyPods:
			short = appendOnce(short, "a free pod slot")
			staticOnly = false
		case reason.Reason == reasonPorts:
			staticOnly = false
		}
	}
	verb := "need"
	if r.Verdict == Uncertain {
		verb = "may need"
	}
	nodes := "nodes"
	if g.Count == 1 {
		nodes = "node"
	}
	if staticOnly {
		// How many such nodes depends on their size: say what they must match, and for how many.
		target := "nodes" + where
		if where == "" {
			target = "nodes its affinity accepts"
		}
		if g.first != nil && len(g.first.Pod.Spec.Tolerations) == 0 {
			target += " without NoSchedule taints"
		}
		replicas := "replicas"
		if g.Count == 1 {
			replicas = "replica"
		}
		return fmt.Sprintf("%s: no node passes its node selector, affinity and taints: %s %s, with room for %d %s (%s)",
			head, verb, target, g.Count, replicas, r.Message)
	}
	if g.first != nil && g.first.Placement.active() {
		pl := g.first.Placement
		if pl.Mode == PlacementPerGPU {
			return fmt.Sprintf("%s: %s %d more free %s (%s placement, with its share of cpu and memory)%s", head, verb, g.Count, pl.gpuName(), pl.Mode, where)
		}
		return fmt.Sprintf("%s: %s room for %d more process(es) at 1/%d of a machine%s", head, verb, g.Count, pl.ProcessesPerMachine, where)
	}
	if len(short) == 0 {
		return fmt.Sprintf("%s: %s", head, r.Message)
	}
	return fmt.Sprintf("%s: %s %d more %s with %s%s", head, verb, g.Count, nodes, strings.Join(short, ", "), where)
}
