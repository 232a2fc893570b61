package plan

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// How the engine works (and why its verdicts are honest).
//
// Filters. For every pod template ("class": replicas share one) the engine runs the
// kube-scheduler's default filters in the scheduler's order, stopping at the first failure
// per node as the scheduler does: NodeName, NodeUnschedulable (tolerated through the
// node.kubernetes.io/unschedulable toleration), TaintToleration (NoSchedule and NoExecute,
// via component-helpers FindMatchingUntoleratedTaint), NodeAffinity (nodeSelector plus
// required node affinity, via component-helpers GetRequiredNodeAffinity), NodePorts and
// NodeResourcesFit (pod requests via component-helpers PodRequests, incl. init containers,
// sidecars, pod-level resources and overhead, against allocatable minus the requests of the
// pods on the node: cpu, memory, ephemeral-storage, extended resources, pod count). Node
// readiness reaches the scheduler as taints (not-ready, unreachable, pressure); the snapshot
// adds the taint a node's condition implies when the node lifecycle controller has not yet.
//
// Placement. Pods are placed one by one in order, each consuming its requests on one node.
// When several nodes are feasible the scheduler's scores decide, which the plan does not
// predict: it consumes capacity on the node with the most free CPU and memory (LeastAllocated,
// the scheduler's default score; ties by name) and reports that node as AssumedNode, never as
// Node.
//
// Verdicts. Whether a pod fits can depend on where earlier pods went. Two bounds that hold for
// every placement the scheduler could choose decide the verdict; only when they disagree is it
// "uncertain" (and AssumedFits tells the outcome in the plan's own placement). "Surely free"
// capacity is what is left after DaemonSets and after earlier pods that surely fit and have a
// single possible node (their consumption is a fact); the other earlier pods are "open".
//   - slots(c) = sum over c's nodes of min over requested resources r of
//     floor(surely_free_r / req_c[r]). Open pods can remove at most min(B1, B2) of them: B1
//     sums, over open pods j sharing a node with c, max_r ceil(req_j[r]/req_c[r]) capped by
//     the most slots one node holds; B2 sums over resources r the units
//     D_r = sum_j ceil(req_j[r]/req_c[r]) beyond r's least headroom over c's nodes (how many
//     more pods r alone would allow than the node's binding resource), which makes a CPU-only
//     replica cost a GPU replica nothing. c surely fits when slots(c) - min(B1, B2) >= 1.
//   - an open pod j that surely fits, whose nodes are all nodes of c and that requests at least
//     what c requests of every resource c needs, takes at least one slot of c; c surely does
//     not fit when slots(c) minus the count of such pods is at most 0.
// For n identical replicas on a pool the bounds meet, so "7 workers on 6 free GPUs" is exactly
// 6 fit and 1 unschedulable. Where the bounds still disagree and the plan is small (at most 64
// nodes, 2048 distinct capacity states), every placement the scheduler could choose is listed
// instead and decides (reachable.go): in the randomized cases of plantest this takes the
// uncertain verdicts from 5.6% to 2.3%, and what stays uncertain truly depends on scoring.
// plantest checks the verdicts against random schedulers, the e2e suite against kube-scheduler.
//
// Not evaluated (the verdict becomes "uncertain" where they apply, with a note): required
// inter-pod affinity/anti-affinity, DoNotSchedule topology spread, scheduling gates, resource
// claims. Volume binding is assumed to succeed (noted), preemption is not modelled, DaemonSet
// pods are placed before all others.

// DefaultPoolLabels are the node labels that name a node pool, first match wins.
var DefaultPoolLabels = []string{
	"polyaxon", "polyaxon.com", "node-pool",
	"cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool",
	"kubernetes.azure.com/agentpool", "agentpool",
}

// Option tunes Plan.
type Option func(*config)

type config struct {
	poolLabels []string
}

// WithPoolLabels sets the node labels that name a node pool (default DefaultPoolLabels).
func WithPoolLabels(keys ...string) Option { return func(c *config) { c.poolLabels = keys } }

const (
	dimPods = iota
	dimCPU
	dimMemory
	dimEphemeral
	firstScalarDim
)

// noPool is the pool of nodes without a pool label.
const noPool = "(no pool label)"

type engine struct {
	snap   *Snapshot
	cfg    config
	names  []corev1.ResourceName // per dim; port dims are "hostport/<proto>/<port>"
	dimOf  map[corev1.ResourceName]int
	ports  map[HostPort]int
	N, R   int
	free   []int64 // N*R, the plan's own placement
	sure   []int64 // N*R, free after DaemonSets and the planned pods whose node is certain
	pools  []string
	poolOf []int32

	classes      []*class
	loss         [][]int64   // [prior][current]: B1 term
	units        [][][]int64 // [prior][current][dim]: B2 terms
	takes        [][]bool    // prior surely takes a slot of current
	log          logr.Logger
	taintReasons map[[2]string]string
}

// taintReason memoizes reason strings: formatting per node per class showed in profiles.
func (e *engine) taintReason(t corev1.Taint) string {
	k := [2]string{t.Key, t.Value}
	r, ok := e.taintReasons[k]
	if !ok {
		if e.taintReasons == nil {
			e.taintReasons = map[[2]string]string{}
		}
		r = reasonTaint(t)
		e.taintReasons[k] = r
	}
	return r
}

type class struct {
	id          int
	pod         *corev1.Pod
	placement   *Placement
	ds          bool
	fixed       []int64 // R, nil for a GPU-fraction claim
	perNode     []int64 // N*R for a GPU-fraction claim
	aff         nodeaffinity.RequiredNodeAffinity
	tols        []corev1.Toleration
	ports       []HostPort
	passes      []int32        // nodes passing the non-resource filters
	static      map[string]int // non-resource failures
	feasible    []int32        // passes with room before any planned pod
	fbits       []uint64
	slotsAt     []int32 // per node: slots before any planned pod (0 outside feasible)
	unevaluated []string
	notes       []string
}

func (c *class) req(e *engine, n int) []int64 {
	if c.fixed != nil {
		return c.fixed
	}
	return c.perNode[n*e.R : (n+1)*e.R]
}

// Plan places pods on the snapshot. DaemonSet entries go first; the others in order; pods
// with Hypothetical set (category probes) are evaluated where they stand and consume nothing.
func Plan(snap *Snapshot, pods []PodToPlace, opts ...Option) *Result {
	cfg := config{poolLabels: DefaultPoolLabels}
	for _, o := range opts {
		o(&cfg)
	}
	e := &engine{snap: snap, cfg: cfg, N: len(snap.Nodes), log: logr.Discard()}
	classOf := e.buildClasses(pods)
	e.buildFree()
	e.buildPools()

	res := &Result{APIVersion: APIVersion, Pods: []PodResult{}}
	res.Cluster = e.clusterSummary()

	// DaemonSets first: their pods are pinned to nodes and created at once.
	for i := range pods {
		if pods[i].daemonSet {
			res.Pods = append(res.Pods, e.placeDaemonSet(&pods[i], e.classes[classOf[i]]))
		}
	}
	for _, c := range e.classes {
		if !c.ds {
			e.prepare(c)
		}
	}
	e.relations()
	e.sure = append([]int64(nil), e.free...)
	start := append([]int64(nil), e.free...)
	var exact reachable

	accLoss := make([]int64, len(e.classes))
	accUnits := make([][]int64, len(e.classes))
	for i := range accUnits {
		accUnits[i] = make([]int64, e.R)
	}
	taken := make([]int64, len(e.classes))
	var results []PodResult
	for i := range pods {
		p := &pods[i]
		if p.daemonSet {
			continue
		}
		c := e.classes[classOf[i]]
		slots, hmin := e.sureSlots(c)
		sureFit := slots-lossBound(hmin, accLoss[c.id], accUnits[c.id]) >= 1
		sureNot := slots-taken[c.id] <= 0
		if !sureFit && !sureNot {
			// The bounds disagree: on a small plan, every placement the scheduler could choose decides.
			if fits, never, ok := e.exactVerdict(&exact, pods, classOf, start, i); ok {
				sureFit, sureNot = fits, never
			}
		}
		r := e.placeOne(p, c, sureFit, sureNot)
		if forced := r.Verdict == Fits && len(c.feasible) == 1; forced && !p.Hypothetical {
			// Certain and only one node: its consumption is a fact, not a bound.
			n := int(c.feasible[0])
			req := c.req(e, n)
			for d, q := range req {
				e.sure[n*e.R+d] -= q
			}
		} else if !p.Hypothetical && r.Verdict != Unschedulable {
			for _, o := range e.classes {
				if o.ds {
					continue
				}
				accLoss[o.id] += e.loss[c.id][o.id]
				if u := e.units[c.id][o.id]; u != nil {
					for d, v := range u {
						accUnits[o.id][d] += v
					}
				}
				if r.Verdict == Fits && e.takes[c.id][o.id] {
					taken[o.id]++
				}
			}
		}
		results = append(results, r)
	}
	for _, r := range results {
		if r.Source == SourceCategory {
			res.Categories = append(res.Categories, CategoryResult{Category: r.Category, Scheduling: schedulingOf(pods, r.Name), Result: r})
			continue
		}
		res.Pods = append(res.Pods, r)
	}
	res.Topologies = topologyResults(pods, res.Pods)
	res.Summary = summarize(res)
	return res
}

func schedulingOf(pods []PodToPlace, name string) string {
	for i := range pods {
		if pods[i].Name == name && pods[i].Source == SourceCategory {
			s := pods[i].Pod.Spec
			return CategoryScheduling{Category: pods[i].Category, NodeSelector: s.NodeSelector, Tolerations: s.Tolerations, Affinity: s.Affinity}.String()
		}
	}
	return ""
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds to its pods.
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

func (e *engine) buildClasses(pods []PodToPlace) []int {
	type key struct {
		pod *corev1.Pod
		pl  *Placement
		ds  bool
	}
	ids := map[key]int{}
	classOf := make([]int, len(pods))
	e.dimOf = map[corev1.ResourceName]int{}
	e.names = []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	for i, n := range e.names {
		e.dimOf[n] = i
	}
	e.ports = map[HostPort]int{}
	var portList []HostPort
	for i := range pods {
		p := &pods[i]
		k := key{p.Pod, p.Placement, p.daemonSet}
		if id, ok := ids[k]; ok {
			classOf[i] = id
			continue
		}
		c := &class{id: len(e.classes), pod: p.Pod, ds: p.daemonSet}
		if p.Placement.active() {
			c.placement = p.Placement
		}
		c.aff = nodeaffinity.GetRequiredNodeAffinity(p.Pod)
		c.tols = p.Pod.Spec.Tolerations
		if c.ds {
			c.tols = append(append([]corev1.Toleration(nil), c.tols...), daemonSetTolerations...)
		}
		c.ports = hostPorts(&p.Pod.Spec)
		for name := range resourcehelper.PodRequests(p.Pod, resourcehelper.PodResourcesOptions{}) {
			if isScalar(name) {
				if _, ok := e.dimOf[name]; !ok {
					e.dimOf[name] = len(e.names)
					e.names = append(e.names, name)
				}
			}
		}
		if c.placement != nil {
			g := gpuResourceOf(p)
			if _, ok := e.dimOf[g]; !ok {
				e.dimOf[g] = len(e.names)
				e.names = append(e.names, g)
			}
		}
		for _, hp := range c.ports {
			if _, ok := e.ports[hp]; !ok {
				e.ports[hp] = -1
				portList = append(portList, hp)
			}
		}
		c.unevaluated = unevaluated(p.Pod, e.snap)
		c.notes = volumeNotes(p.Pod)
		ids[k] = c.id
		classOf[i] = c.id
		e.classes = append(e.classes, c)
	}
	for _, hp := range portList {
		e.ports[hp] = len(e.names)
		e.names = append(e.names, corev1.ResourceName(fmt.Sprintf("hostport/%s/%d", hp.Protocol, hp.Port)))
	}
	e.R = len(e.names)
	// A planned pod with required anti-affinity may keep later pods off its node.
	for _, c := range e.classes {
		a := c.pod.Spec.Affinity
		if a == nil || a.PodAntiAffinity == nil {
			continue
		}
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
			if err != nil {
				continue
			}
			for _, o := range e.classes {
				if o != c && sel.Matches(labels.Set(o.pod.Labels)) {
					o.unevaluated = appendOnce(o.unevaluated, "another planned pod's required anti-affinity selects this pod (not evaluated)")
				}
			}
		}
	}
	for _, c := range e.classes {
		c.fixed = make([]int64, e.R)
		c.fixed[dimPods] = 1
		for name, q := range resourcehelper.PodRequests(c.pod, resourcehelper.PodResourcesOptions{}) {
			d, ok := e.dimOf[name]
			if !ok {
				continue
			}
			switch name {
			case corev1.ResourceCPU:
				c.fixed[d] = q.MilliValue()
			default:
				c.fixed[d] = q.Value()
			}
		}
		for _, hp := range c.ports {
			c.fixed[e.ports[hp]] = 1
		}
		e.filter(c)
	}
	return classOf
}

func gpuResourceOf(p *PodToPlace) corev1.ResourceName { return p.Placement.gpuName() }

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// unevaluated lists filters the plan does not model that apply to this pod.
func unevaluated(p *corev1.Pod, snap *Snapshot) []string {
	var out []string
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			out = append(out, "required pod affinity (not evaluated)")
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			out = append(out, "required pod anti-affinity (not evaluated)")
		}
	}
	for _, t := range p.Spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			out = append(out, "topology spread constraint with DoNotSchedule (not evaluated)")
			break
		}
	}
	if len(p.Spec.SchedulingGates) > 0 {
		out = append(out, "scheduling gates: the pod waits until they are removed")
	}
	if len(p.Spec.ResourceClaims) > 0 {
		out = append(out, "dynamic resource claims (not evaluated)")
	}
	set := labels.Set(p.Labels)
	for _, sel := range snap.antiAffinity {
		if sel.Matches(set) {
			out = append(out, "an existing pod's required anti-affinity selects this pod (not evaluated)")
			break
		}
	}
	return out
}

func volumeNotes(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, "assumes volume "+v.Name+" binds on the chosen node (volume binding not evaluated)")
		}
	}
	if p.Spec.PriorityClassName != "" {
		out = append(out, "priority class "+p.Spec.PriorityClassName+": preemption of lower-priority pods not modelled")
	}
	return out
}

// filter runs the non-resource filters on every node.
func (e *engine) filter(c *class) {
	c.static = map[string]int{}
	unschedTaint := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	tolUnsched := schedcorev1.TolerationsTolerateTaint(e.log, c.tols, unschedTaint, false)
	for n, ni := range e.snap.Nodes {
		node := ni.Node
		if c.pod.Spec.NodeName != "" && c.pod.Spec.NodeName != node.Name {
			c.static[reasonNodeName]++
			continue
		}
		if node.Spec.Unschedulable && !tolUnsched {
			c.static[reasonUnschedulable]++
			continue
		}
		if len(ni.filterTaints) > 0 {
			// Taints are pre-filtered to NoSchedule/NoExecute (the scheduler's
			// DoNotScheduleTaintsFilterFunc), so no filter func and no allocation here.
			if t, bad := schedcorev1.FindMatchingUntoleratedTaint(e.log, ni.filterTaints, c.tols, nil, false); bad {
				c.static[e.taintReason(t)]++
				continue
			}
		}
		ok, err := c.aff.Match(node)
		if err != nil {
			c.notes = appendOnce(c.notes, "invalid node affinity: "+err.Error())
		}
		if !ok {
			c.static[reasonAffinity]++
			continue
		}
		if portConflict(c.ports, ni.HostPorts) {
			c.static[reasonPorts]++
			continue
		}
		c.passes = append(c.passes, int32(n))
	}
}

func portConflict(want, used []HostPort) bool {
	for _, w := range want {
		for _, u := range used {
			if w == u {
				return true
			}
		}
	}
	return false
}

func (e *engine) buildFree() {
	e.free = make([]int64, e.N*e.R)
	for n, ni := range e.snap.Nodes {
		f := e.free[n*e.R : (n+1)*e.R]
		for d, name := range e.names {
			switch {
			case d == dimPods:
				f[d] = ni.Allocatable.AllowedPods - int64(ni.Pods)
			case strings.HasPrefix(string(name), "hostport/"):
				f[d] = 1
			default:
				f[d] = ni.Allocatable.get(name) - ni.Requested.get(name)
			}
		}
	}
}

func (e *engine) buildPools() {
	idx := map[string]int32{}
	e.poolOf = make([]int32, e.N)
	for n, ni := range e.snap.Nodes {
		name := noPool
		for _, k := range e.cfg.poolLabels {
			if v, ok := ni.Node.Labels[k]; ok {
				name = k + "=" + v
				break
			}
		}
		id, ok := idx[name]
		if !ok {
			id = int32(len(e.pools))
			idx[name] = id
			e.pools = append(e.pools, name)
		}
		e.poolOf[n] = id
	}
}

// prepare computes a class's GPU-fraction claims, its feasible nodes and its slots on the
// cluster before any planned pod (after DaemonSets).
func (e *engine) prepare(c *class) {
	if c.placement != nil {
		c.perNode = make([]int64, e.N*e.R)
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
		f := e.sure[n*e.R : (n+1)*e.R]
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
	r := c.perNode[n*e.R : (n+1)*e.R]
	copy(r, c.fixed) // ports, pods and anything else the pod requests
	f := e.free[n*e.R : (n+1)*e.R]
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
		r[dimCPU] = max64(1, share(f[dimCPU], ngpu))
		r[dimMemory] = max64(1, share(f[dimMemory], ngpu))
	case PlacementPerMachine:
		k := int64(c.placement.ProcessesPerMachine)
		r[dimCPU] = max64(1, share(f[dimCPU], k))
		r[dimMemory] = max64(1, share(f[dimMemory], k))
		r[gpu] = share(f[gpu], k)
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// slotsOn is how many pods of class c node n holds at the current free resources.
func (e *engine) slotsOn(c *class, n int) int64 {
	req := c.req(e, n)
	f := e.free[n*e.R : (n+1)*e.R]
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

// fitsOn reports whether class c fits node n now.
func (e *engine) fitsOn(c *class, n int) bool {
	req := c.req(e, n)
	f := e.free[n*e.R : (n+1)*e.R]
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
	f := e.free[n*e.R : (n+1)*e.R]
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
	f := e.free[n*e.R : (n+1)*e.R]
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

// explain builds the scheduler's histogram for a pod that fits nowhere now.
func (e *engine) explain(c *class) (string, []Reason) {
	hist := make(map[string]int, len(c.static)+2)
	for k, v := range c.static {
		hist[k] = v
	}
	for _, n32 := range c.passes {
		n := int(n32)
		req := c.req(e, n)
		f := e.free[n*e.R : (n+1)*e.R]
		portBad := false
		for d := firstScalarDim; d < e.R; d++ {
			if strings.HasPrefix(string(e.names[d]), "hostport/") && req[d] > 0 && req[d] > f[d] {
				portBad = true
			}
		}
		if portBad {
			hist[reasonPorts]++
			continue
		}
		for d, q := range req {
			if q <= 0 || q <= f[d] {
				continue
			}
			if d == dimPods {
				hist[reasonTooManyPods]++
			} else if !strings.HasPrefix(string(e.names[d]), "hostport/") {
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
		if d == dimPods || q <= 0 || strings.HasPrefix(string(e.names[d]), "hostport/") {
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
