package plan

// Placement: each pod on the node with the most free CPU and memory among those it fits now,
// its verdict from the bounds, and the scheduler's reasons where it fits nowhere.

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// fitsOn reports whether class c fits node n now.
func (e *engine) fitsOn(c *class, n int) bool {
	req := c.req(e, n)
	f := e.free.row(n)
	for d, q := range req {
		if q > 0 && q > f[d] {
			return false
		}
	}
	return true
}

// score is the LeastAllocated score after placing: mean free fraction of cpu and memory.
func (e *engine) score(c *class, n int) float64 {
	req := c.req(e, n)
	alloc := &e.snap.Nodes[n].Allocatable
	f := e.free.row(n)
	var s float64
	if alloc.MilliCPU > 0 {
		s += float64(f[dimCPU]-req[dimCPU]) / float64(alloc.MilliCPU)
	}
	if alloc.Memory > 0 {
		s += float64(f[dimMemory]-req[dimMemory]) / float64(alloc.Memory)
	}
	return s
}

func (e *engine) charge(c *class, n int) {
	req := c.req(e, n)
	f := e.free.row(n)
	for d, q := range req {
		f[d] -= q
	}
}

func (e *engine) placeOne(p *PodToPlace, c *class, sureFit, sureNot bool) PodResult {
	r := PodResult{
		Name: p.Name, Source: p.Source, Kind: p.Kind, Owner: p.Owner, Component: p.Component,
		Category: p.Category, Role: p.Role, Index: p.Index,
		CandidateNodes: len(c.feasible),
		Notes:          append(append(append([]string(nil), p.Notes...), c.unevaluated...), c.notes...),
	}
	best, bestScore := -1, 0.0
	poolCounts := map[int32]int{}
	for _, n32 := range c.feasible {
		n := int(n32)
		if !e.fitsOn(c, n) {
			continue
		}
		r.FeasibleNodes++
		poolCounts[e.poolOf[n]]++
		if s := e.score(c, n); best < 0 || s > bestScore {
			best, bestScore = n, s
		}
	}
	r.AssumedFits = best >= 0
	r.Pools = e.poolList(poolCounts)
	if c.placement != nil {
		r.Placement = c.placement.String()
	}
	switch {
	case best >= 0:
		r.Requests = e.requestsMap(c.req(e, best))
	case c.fixed != nil:
		r.Requests = e.requestsMap(c.fixed)
	default:
		r.Requests = map[string]string{} // a fraction claim has no size off a node
	}

	switch {
	case sureNot:
		r.Verdict = Unschedulable
	case sureFit && len(c.unevaluated) == 0:
		r.Verdict = Fits
	default:
		r.Verdict = Uncertain
	}
	if sureFit && best < 0 {
		// Cannot happen if the bounds are right: be honest rather than wrong.
		r.Verdict = Uncertain
		r.Notes = append(r.Notes, "internal: bound and placement disagree")
	}
	if r.Verdict == Unschedulable && best >= 0 {
		r.Verdict = Uncertain
		r.Notes = append(r.Notes, "internal: bound and placement disagree")
	}
	if r.Verdict == Uncertain && sureFit == sureNot {
		r.Notes = append(r.Notes, "depends on which nodes the scheduler picks for earlier pods (scoring is not predicted)")
	}
	if best >= 0 {
		r.Pool = e.pools[e.poolOf[best]]
		if r.Verdict == Fits && len(c.feasible) == 1 {
			r.Node = e.snap.Nodes[best].Node.Name
		} else {
			r.AssumedNode = e.snap.Nodes[best].Node.Name
		}
		if !p.Hypothetical {
			e.charge(c, best)
		}
	} else {
		r.Message, r.Reasons = e.explain(c)
	}
	return r
}

// isSlotDim: a dimension every node has once (a host port, an evaluated anti-affinity term),
// not a resource.
func isSlotDim(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), "hostport/") || strings.HasPrefix(string(name), antiAffinityDimPrefix)
}

// explain builds the scheduler's histogram for a pod that fits nowhere now.
func (e *engine) explain(c *class) (string, []Reason) {
	hist := make(map[string]int, len(c.static)+2)
	for k, v := range c.static {
		hist[k] = v
	}
	for _, n32 := range c.passes {
		n := int(n32)
		req := c.req(e, n)
		f := e.free.row(n)
		portBad, antiBad := false, false
		for d := firstScalarDim; d < e.R; d++ {
			if req[d] > 0 && req[d] > f[d] {
				portBad = portBad || strings.HasPrefix(string(e.names[d]), "hostport/")
				antiBad = antiBad || strings.HasPrefix(string(e.names[d]), antiAffinityDimPrefix)
			}
		}
		if portBad {
			hist[reasonPorts]++
			continue
		}
		if antiBad {
			hist[reasonAntiAffinity]++
			continue
		}
		for d, q := range req {
			if q <= 0 || q <= f[d] {
				continue
			}
			if d == dimPods {
				hist[reasonTooManyPods]++
			} else if !isSlotDim(e.names[d]) {
				hist[reasonInsufficient(e.names[d])]++
			}
		}
	}
	return fitMessage(e.N, hist)
}

// requestsMap renders a request vector; n < 0 on a fraction class gives the symbolic claim.
func (e *engine) requestsMap(req []int64) map[string]string {
	out := map[string]string{}
	if req == nil {
		return out
	}
	for d, q := range req {
		if d == dimPods || q <= 0 || isSlotDim(e.names[d]) {
			continue
		}
		out[string(e.names[d])] = amountText(e.names[d], q)
	}
	return out
}

func (e *engine) poolList(counts map[int32]int) []PoolCount {
	if len(counts) == 0 {
		return nil
	}
	out := make([]PoolCount, 0, len(counts))
	for id, n := range counts {
		out = append(out, PoolCount{Pool: e.pools[id], Nodes: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Nodes != out[j].Nodes {
			return out[i].Nodes > out[j].Nodes
		}
		return out[i].Pool < out[j].Pool
	})
	return out
}

func (e *engine) placeDaemonSet(p *PodToPlace, c *class) PodResult {
	r := PodResult{Name: p.Name, Source: p.Source, Kind: p.Kind, Owner: p.Owner, Component: p.Component,
		Category: p.Category, Requests: e.requestsMap(c.fixed), Notes: append(append([]string(nil), c.unevaluated...), c.notes...)}
	ds := &DaemonSetResult{}
	poolCounts := map[int32]int{}
	for _, n32 := range c.passes {
		n := int(n32)
		ds.EligibleNodes++
		if e.fitsOn(c, n) {
			ds.Fitting++
			poolCounts[e.poolOf[n]]++
			e.charge(c, n)
		} else if len(ds.Unfit) < 20 {
			ds.Unfit = append(ds.Unfit, e.snap.Nodes[n].Node.Name)
		}
	}
	r.DaemonSet = ds
	r.CandidateNodes, r.FeasibleNodes = ds.EligibleNodes, ds.Fitting
	r.Pools = e.poolList(poolCounts)
	r.AssumedFits = ds.Fitting == ds.EligibleNodes
	r.Verdict = Fits
	if !r.AssumedFits {
		r.Verdict = Unschedulable
		r.Message = fmt.Sprintf("%d of %d eligible node(s) lack room for the DaemonSet pod", ds.EligibleNodes-ds.Fitting, ds.EligibleNodes)
	} else if len(c.unevaluated) > 0 {
		r.Verdict = Uncertain
	}
	return r
}
