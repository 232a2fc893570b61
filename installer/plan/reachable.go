package plan

import "encoding/binary"

// Exact verdicts for small plans. The bounds (see "Verdicts" in engine.go) are cheap and hold
// for any cluster, but two bounds can leave a pod uncertain although every placement the
// scheduler could choose agrees. When the cluster and the plan are small, the engine lists
// those placements instead: the set of capacity states reachable by placing the pods in order,
// each on any node where it fits at that moment (the scheduler binds a pod whenever a node
// fits; one that fits nowhere stays pending and takes nothing). A pod surely fits when it fits
// somewhere in every reachable state, and surely does not when it fits in none. Identical
// states are kept once, so n replicas over k nodes make at most C(n+k-1, k-1) states, not k^n.
// Past the limits (nodes, states, work) the bounds' verdicts stand.
const (
	maxReachableStates = 2048
	maxReachableNodes  = 64
)

// maxReachableWork bounds the (state, node) pairs tried over the whole plan: a few hundred
// milliseconds at worst, whatever the number of pods. A variable for tests.
var maxReachableWork = 4_000_000

// reachable holds the exact verdicts of the plan's pods, computed on first use.
type reachable struct {
	done bool
	// fits[i]/never[i]: pod i fits in every / in no reachable state; decided[i] is false once
	// the state set grew past maxReachableStates before pod i.
	fits, never, decided []bool
}

// verdict returns the exact verdict of pod i, computing all of them on first use; ok is false
// when the plan is too large for it.
func (e *engine) exactVerdict(r *reachable, pods []PodToPlace, classOf []int, start matrix, i int) (fits, never, ok bool) {
	if !r.done {
		r.done = true
		e.computeReachable(r, pods, classOf, start)
	}
	if i >= len(r.decided) || !r.decided[i] {
		return false, false, false
	}
	return r.fits[i], r.never[i], true
}

// computeReachable walks the reachable states from start (free capacity after the DaemonSets).
func (e *engine) computeReachable(r *reachable, pods []PodToPlace, classOf []int, start matrix) {
	if e.N == 0 || e.N > maxReachableNodes {
		return
	}
	r.fits, r.never, r.decided = make([]bool, len(pods)), make([]bool, len(pods)), make([]bool, len(pods))
	states := []matrix{start.clone()}
	work := 0
	for i := range pods {
		p := &pods[i]
		if p.daemonSet {
			continue
		}
		c := e.classes[classOf[i]]
		fitsAll, fitsAny := true, false
		next := &stateSet{seen: map[string]struct{}{}}
		for _, s := range states {
			if work += len(c.feasible); work > maxReachableWork {
				return
			}
			placed := false
			for _, n32 := range c.feasible {
				n := int(n32)
				req := c.req(e, n)
				if !fitsIn(s.row(n), req) {
					continue
				}
				placed = true
				if p.Hypothetical {
					break // a probe consumes nothing: whether it fits is all that matters
				}
				t := s.clone()
				f := t.row(n)
				for d, q := range req {
					f[d] -= q
				}
				next.add(t)
			}
			fitsAny = fitsAny || placed
			fitsAll = fitsAll && placed
			// Pending: it fits nowhere, it consumes nothing (a probe), or a constraint the engine
			// does not evaluate may keep it pending although it fits.
			if !placed || p.Hypothetical || len(c.unevaluated) > 0 {
				next.add(s)
			}
			if next.len() > maxReachableStates {
				return
			}
		}
		r.fits[i], r.never[i], r.decided[i] = fitsAll, !fitsAny, true
		states = next.list
	}
}

func fitsIn(free, req []int64) bool {
	for d, q := range req {
		if q > 0 && q > free[d] {
			return false
		}
	}
	return true
}

// stateSet keeps distinct capacity states.
type stateSet struct {
	seen map[string]struct{}
	list []matrix
}

func (s *stateSet) add(v matrix) {
	b := make([]byte, 0, len(v.v)*3)
	for _, x := range v.v {
		b = binary.AppendVarint(b, x)
	}
	k := string(b)
	if _, ok := s.seen[k]; ok {
		return
	}
	s.seen[k] = struct{}{}
	s.list = append(s.list, v)
}

func (s *stateSet) len() int { return len(s.list) }
