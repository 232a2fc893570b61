package plan

// Bounds: how many pods of a class surely fit whatever the scheduler picks for the earlier
// ones, and which earlier pods surely take one of its slots (see the note in engine.go).

import (
	"math"
	"math/bits"
)

// prepare computes a class's GPU-fraction claims, its feasible nodes and its slots on the
// cluster before any planned pod (after DaemonSets).
func (e *engine) prepare(c *class) {
	if c.placement != nil {
		c.perNode = newMatrix(e.N, e.R)
		for _, n := range c.passes {
			e.fractionClaim(c, int(n))
		}
		c.fixed = nil
	}
	c.fbits = make([]uint64, (e.N+63)/64)
	c.slotsAt = make([]int32, e.N)
	for _, n := range c.passes {
		s := e.slotsOn(c, int(n))
		if s <= 0 {
			continue
		}
		c.slotsAt[n] = int32(min(s, math.MaxInt32))
		c.feasible = append(c.feasible, n)
		c.fbits[n/64] |= 1 << (uint(n) % 64)
	}
}

// openPods are the earlier planned pods that may fit but whose node is not certain: what they
// can take from each class (the B1 and B2 terms of the note in engine.go), and how many slots
// of it they surely take.
type openPods struct {
	loss  []int64 // per class: B1
	units matrix  // per class, per dimension: the D_r of B2
	taken []int64 // per class
}

func (e *engine) newOpenPods() *openPods {
	k := len(e.classes)
	return &openPods{loss: make([]int64, k), units: newMatrix(k, e.R), taken: make([]int64, k)}
}

// add counts one more open pod of class c (fits: its verdict is Fits).
func (o *openPods) add(e *engine, c *class, fits bool) {
	for _, other := range e.classes {
		if other.ds {
			continue
		}
		o.loss[other.id] += e.loss[c.id][other.id]
		if u := e.units[c.id][other.id]; u != nil {
			acc := o.units.row(other.id)
			for d, v := range u {
				acc[d] += v
			}
		}
		if fits && e.takes[c.id][other.id] {
			o.taken[other.id]++
		}
	}
}

// bounds decide the verdict of the next pod of class c: it surely fits when the slots surely
// free outnumber what the open pods can take, and surely does not when the open pods that
// surely take a slot take them all.
func (e *engine) bounds(c *class, open *openPods) (sureFit, sureNot bool) {
	slots, hmin := e.sureSlots(c)
	return slots-lossBound(hmin, open.loss[c.id], open.units.row(c.id)) >= 1, slots-open.taken[c.id] <= 0
}

// consumeSure takes a pod of class c from node n's surely free capacity: a pod that surely
// fits and has one possible node is a fact, not a bound.
func (e *engine) consumeSure(c *class, n int) {
	f := e.sure.row(n)
	for d, q := range c.req(e, n) {
		f[d] -= q
	}
}

// sureSlots is how many pods of class c fit on the capacity that is certainly free now
// (DaemonSets and forced pods consumed), and per resource the least headroom over c's nodes:
// how many more pods that resource alone would allow than the node's binding resource.
func (e *engine) sureSlots(c *class) (int64, []int64) {
	hmin := make([]int64, e.R)
	for d := range hmin {
		hmin[d] = math.MaxInt64
	}
	var total int64
	for _, n32 := range c.feasible {
		n := int(n32)
		req := c.req(e, n)
		f := e.sure.row(n)
		s := int64(math.MaxInt64)
		for d, q := range req {
			if q > 0 {
				x := f[d] / q
				if f[d] < 0 {
					x = 0
				}
				s = min(s, x)
			}
		}
		if s <= 0 {
			continue
		}
		total += s
		for d, q := range req {
			if q > 0 {
				hmin[d] = min(hmin[d], f[d]/q-s)
			}
		}
	}
	return total, hmin
}

// lossBound is min(B1, B2): the most slots of a class that the earlier planned pods (those
// not already consumed as certain) can take.
func lossBound(hmin []int64, b1 int64, units []int64) int64 {
	var b2 int64
	for d, u := range units {
		if u > 0 && hmin[d] != math.MaxInt64 && u > hmin[d] {
			b2 += u - hmin[d]
		}
	}
	if b2 < b1 {
		return b2
	}
	return b1
}

// fractionClaim fills the claim of a GPU-fraction class on node n from the node's free
// resources at the start of the plan.
func (e *engine) fractionClaim(c *class, n int) {
	r := c.perNode.row(n)
	copy(r, c.fixed) // ports, pods and anything else the pod requests
	f := e.free.row(n)
	gpu := e.dimOf[c.placement.gpuName()]
	share := func(v, k int64) int64 {
		if v < 0 {
			v = 0
		}
		return v / k
	}
	switch c.placement.Mode {
	case PlacementPerGPU:
		ngpu := e.snap.Nodes[n].Allocatable.get(e.names[gpu])
		r[gpu] = 1
		if ngpu <= 0 {
			r[dimCPU], r[dimMemory] = 0, 0
			return
		}
		r[dimCPU] = max(1, share(f[dimCPU], ngpu))
		r[dimMemory] = max(1, share(f[dimMemory], ngpu))
	case PlacementPerMachine:
		k := int64(c.placement.ProcessesPerMachine)
		r[dimCPU] = max(1, share(f[dimCPU], k))
		r[dimMemory] = max(1, share(f[dimMemory], k))
		r[gpu] = share(f[gpu], k)
	}
}

// slotsOn is how many pods of class c node n holds at the current free resources.
func (e *engine) slotsOn(c *class, n int) int64 {
	req := c.req(e, n)
	f := e.free.row(n)
	slots := int64(math.MaxInt64)
	for d, q := range req {
		if q <= 0 {
			continue
		}
		s := f[d] / q
		if f[d] < 0 {
			s = 0
		}
		if s < slots {
			slots = s
		}
	}
	return slots
}

// relations computes, for each pair of classes, the most slots of the second a pod of the
// first can take, and whether it surely takes one.
func (e *engine) relations() {
	k := len(e.classes)
	e.loss = make([][]int64, k)
	e.units = make([][][]int64, k)
	e.takes = make([][]bool, k)
	for a := range e.classes {
		e.loss[a] = make([]int64, k)
		e.units[a] = make([][]int64, k)
		e.takes[a] = make([]bool, k)
	}
	for _, a := range e.classes {
		if a.ds {
			continue
		}
		for _, b := range e.classes {
			if b.ds || !intersects(a.fbits, b.fbits) {
				continue
			}
			u := make([]int64, e.R)
			e.units[a.id][b.id] = u
			if a.fixed != nil && b.fixed != nil {
				l := lossOf(a.fixed, b.fixed)
				if l > 1 {
					// One pod takes at most all the slots of the node it lands on.
					var most int64
					forEachAnd(a.fbits, b.fbits, func(n int) { most = max(most, int64(b.slotsAt[n])) })
					l = min(l, most)
				}
				e.loss[a.id][b.id] = l
				unitsOf(a.fixed, b.fixed, u)
				e.takes[a.id][b.id] = subset(a.fbits, b.fbits) && dominates(a.fixed, b.fixed)
				continue
			}
			var l int64
			forEachAnd(a.fbits, b.fbits, func(n int) {
				if x := min(lossOf(a.req(e, n), b.req(e, n)), int64(b.slotsAt[n])); x > l {
					l = x
				}
				unitsOf(a.req(e, n), b.req(e, n), u)
			})
			e.loss[a.id][b.id] = l
			if subset(a.fbits, b.fbits) {
				dom := true
				for _, n := range a.feasible {
					if !dominates(a.req(e, int(n)), b.req(e, int(n))) {
						dom = false
						break
					}
				}
				e.takes[a.id][b.id] = dom
			}
		}
	}
}

func lossOf(a, b []int64) int64 {
	var l int64
	for d, q := range b {
		if q <= 0 || a[d] <= 0 {
			continue
		}
		if x := (a[d] + q - 1) / q; x > l {
			l = x
		}
	}
	return l
}

// unitsOf raises u[r] to ceil(a[r]/b[r]) where both request r.
func unitsOf(a, b, u []int64) {
	for d, q := range b {
		if q <= 0 || a[d] <= 0 {
			continue
		}
		if x := (a[d] + q - 1) / q; x > u[d] {
			u[d] = x
		}
	}
}

func dominates(a, b []int64) bool {
	for d, q := range b {
		if q > 0 && a[d] < q {
			return false
		}
	}
	return true
}

func intersects(a, b []uint64) bool {
	for i := range a {
		if a[i]&b[i] != 0 {
			return true
		}
	}
	return false
}

func subset(a, b []uint64) bool {
	for i := range a {
		if a[i]&^b[i] != 0 {
			return false
		}
	}
	return true
}

func forEachAnd(a, b []uint64, fn func(int)) {
	for i := range a {
		w := a[i] & b[i]
		for w != 0 {
			t := bits.TrailingZeros64(w)
			fn(i*64 + t)
			w &= w - 1
		}
	}
}
