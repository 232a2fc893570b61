package plan

// Sized from pools: when install, upgrade or plan reach the cluster, the runs' quota totals
// (pods, cpu, memory, ephemeral-storage and each GPU resource) default to Backlog times the
// sum of the allocatable resources of the run pools' nodes, and one run container's max to
// the largest such node's, so that all runs together cannot ask for more than the run pools
// hold and as much again waiting, and no container for more than a node has
// (installer/action sized.go layers it into the values).
//
// The run pools are the nodes a run of some category may land on with its category's
// placement (CategoryDefaults): its nodeSelector and required node affinity select the node,
// and its tolerations tolerate the node's own NoSchedule and NoExecute taints (not those a
// NotReady or pressured node carries for a while). A category the release's admission
// policies refuse is no pool. Nodes are named by pool as the plan names them.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// RunPools is what the run pools hold.
type RunPools struct {
	// Pools are the run pools, each with the number of its nodes runs may use, in name order.
	Pools []PoolCount
	// Totals are the sums of the pools' nodes' allocatable: cpu, memory, ephemeral-storage,
	// pods, and each GPU resource (a resource whose name says gpu, as plan's table counts them).
	Totals corev1.ResourceList
	// Largest is, per resource, the largest allocatable of one of those nodes: cpu, memory,
	// ephemeral-storage.
	Largest corev1.ResourceList
}

// SizeRunPools sizes the runs' bounds from the snapshot's nodes that the categories' placement
// selects; poolLabels name the pools (nil: DefaultPoolLabels). It is nil when no node
// is in a run pool: then nothing is sized, and the values say what the quota holds.
func SizeRunPools(snap *Snapshot, categories []CategoryScheduling, poolLabels []string) *RunPools {
	if len(poolLabels) == 0 {
		poolLabels = DefaultPoolLabels
	}
	s := &RunPools{Totals: corev1.ResourceList{}, Largest: corev1.ResourceList{}}
	pools := map[string]int{}
	for _, n := range snap.Nodes {
		if !inRunPool(n, categories) {
			continue
		}
		pools[poolOf(n.Node.Labels, poolLabels)]++
		a := n.Allocatable
		addQuantity(s.Totals, corev1.ResourceCPU, *resource.NewMilliQuantity(a.MilliCPU, resource.DecimalSI))
		addQuantity(s.Totals, corev1.ResourceMemory, *resource.NewQuantity(a.Memory, resource.BinarySI))
		addQuantity(s.Totals, corev1.ResourceEphemeralStorage, *resource.NewQuantity(a.EphemeralStorage, resource.BinarySI))
		addQuantity(s.Totals, corev1.ResourcePods, *resource.NewQuantity(a.AllowedPods, resource.DecimalSI))
		for name, v := range a.Scalar {
			if isGPU(name) {
				addQuantity(s.Totals, name, *resource.NewQuantity(v, resource.DecimalSI))
			}
		}
		keepLargest(s.Largest, corev1.ResourceCPU, *resource.NewMilliQuantity(a.MilliCPU, resource.DecimalSI))
		keepLargest(s.Largest, corev1.ResourceMemory, *resource.NewQuantity(a.Memory, resource.BinarySI))
		keepLargest(s.Largest, corev1.ResourceEphemeralStorage, *resource.NewQuantity(a.EphemeralStorage, resource.BinarySI))
	}
	if len(pools) == 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		s.Pools = append(s.Pools, PoolCount{Pool: name, Nodes: pools[name]})
	}
	// A resource no node has (0 ephemeral-storage on a node that reports none) bounds nothing.
	for _, l := range []corev1.ResourceList{s.Totals, s.Largest} {
		for k, v := range l {
			if v.IsZero() {
				delete(l, k)
			}
		}
	}
	return s
}

// isGPU says whether an extended resource is a GPU: its name says so (nvidia.com/gpu,
// amd.com/gpu, gpu.intel.com/i915), as plan's table counts GPUs.
func isGPU(name corev1.ResourceName) bool {
	return strings.Contains(string(name), "gpu") && strings.Contains(string(name), "/")
}

// Backlog is how many times the run pools' totals the quota admits: what runs hold on the
// nodes and as much again waiting for them. A pod beyond the quota is refused and its run
// fails (the agent's refusals container), where a pod beyond the nodes waits Pending and runs
// when a node frees up: at twice the pools, a sweep or a distributed run larger than the free
// nodes still queues, and a flood (or one run asking for more than all the pools hold twice
// over) is refused with the quota's reason.
const Backlog = 2

// Values are the sizing as chart values: the layer between the profile and the user's
// values. Only what the pools have is given.
func (s *RunPools) Values() map[string]any {
	quota := map[string]any{}
	for key, name := range map[string]corev1.ResourceName{"pods": corev1.ResourcePods, "cpu": corev1.ResourceCPU,
		"memory": corev1.ResourceMemory, "ephemeralStorage": corev1.ResourceEphemeralStorage} {
		if q, ok := s.Totals[name]; ok {
			quota[key] = backlog(q).String()
		}
	}
	gpus := map[string]any{}
	for name, q := range s.Totals {
		if isGPU(name) {
			gpus[string(name)] = backlog(q).String()
		}
	}
	if len(gpus) > 0 {
		quota["gpus"] = gpus
	}
	biggest := map[string]any{}
	for name, q := range s.Largest {
		biggest[string(name)] = q.String()
	}
	runs := map[string]any{"quota": quota}
	if len(biggest) > 0 {
		runs["limitRange"] = map[string]any{"max": biggest}
	}
	return map[string]any{"runs": runs}
}

// Paths are Values as dotted value paths to their values (runs.quota.cpu: 40): what plan's
// result carries (RunsQuota.Sized) and the debug log says.
func (s *RunPools) Paths() map[string]string {
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + "." + k
			if prefix == "" {
				p = k
			}
			if sub, ok := v.(map[string]any); ok {
				walk(p, sub)
				continue
			}
			out[p] = fmt.Sprint(v)
		}
	}
	walk("", s.Values())
	return out
}

// String names the pools and what they hold, for the progress line (Backlog is 2).
func (s *RunPools) String() string {
	var pools []string
	for _, p := range s.Pools {
		pools = append(pools, fmt.Sprintf("%s (%d node%s)", p.Pool, p.Nodes, map[bool]string{true: "", false: "s"}[p.Nodes == 1]))
	}
	var totals []string
	for _, name := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := s.Totals[name]; ok {
			totals = append(totals, fmt.Sprintf("%s %s", name, q.String()))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Totals)) {
		if isGPU(name) {
			q := s.Totals[name]
			totals = append(totals, fmt.Sprintf("%s %s", name, q.String()))
		}
	}
	return fmt.Sprintf("run pools %s: %s; the quota twice that", strings.Join(pools, ", "), strings.Join(totals, ", "))
}

// inRunPool: a run of one of the categories may land on the node, by its placement.
func inRunPool(n *NodeInfo, categories []CategoryScheduling) bool {
	var taints []corev1.Taint
	for _, t := range n.Node.Spec.Taints {
		if !slices.ContainsFunc(n.ImpliedTaints, func(i corev1.Taint) bool { return i.Key == t.Key && i.Effect == t.Effect }) {
			taints = append(taints, t)
		}
	}
	for _, c := range categories {
		if c.Refused != "" {
			continue
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: c.NodeSelector, Affinity: c.Affinity}}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n.Node); err != nil || !ok {
			continue
		}
		filter := func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}
		if _, untolerated := schedcorev1.FindMatchingUntoleratedTaint(logr.Discard(), taints, c.Tolerations, filter, false); untolerated {
			continue
		}
		return true
	}
	return false
}

// poolOf names a node's pool (the plan's pools, buildPools): the first pool label it carries.
func poolOf(labels map[string]string, poolLabels []string) string {
	for _, k := range poolLabels {
		if v, ok := labels[k]; ok {
			return k + "=" + v
		}
	}
	return noPool
}

func addQuantity(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur, ok := l[name]
	if !ok {
		l[name] = q
		return
	}
	cur.Add(q)
	l[name] = cur
}

func keepLargest(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; !ok || q.Cmp(cur) > 0 {
		l[name] = q
	}
}

// backlog is q times Backlog, in q's format.
func backlog(q resource.Quantity) *resource.Quantity {
	out := q.DeepCopy()
	for range Backlog - 1 {
		out.Add(q)
	}
	return &out
}
