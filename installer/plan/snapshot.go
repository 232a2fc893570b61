package plan

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	resourcehelper "k8s.io/component-helpers/resource"
)

// DefaultPageSize is the LIST page size (the informer's default is 500 too).
const DefaultPageSize = 500

// podsFieldSelector is the kube-scheduler's own selector for the pods it accounts for.
const podsFieldSelector = "status.phase!=Succeeded,status.phase!=Failed"

// Snapshot is what the scheduler's filters see of a cluster: nodes (labels, taints,
// unschedulable, allocatable, conditions) and the requests of the pods bound to them. It keeps
// no Pod objects, only per-node sums, so its size is linear in nodes, not pods.
type Snapshot struct {
	Nodes []*NodeInfo
	// ExistingPods counts the non-terminal pods bound to a listed node.
	ExistingPods int
	// OrphanPods counts pods bound to a node the node list did not return.
	OrphanPods int
	// APICalls counts the LIST requests made to build the snapshot (pages included).
	APICalls int
	// antiAffinity are the distinct required pod anti-affinity selectors of existing pods; a
	// planned pod they select may be kept off nodes for reasons the plan does not evaluate.
	antiAffinity []labels.Selector
	byName       map[string]int
	reuse        corev1.ResourceList
}

// hasStatusResources reports whether the kubelet reported resources for the pod (in-place
// resize), which the scheduler then accounts as max(spec, status).
func hasStatusResources(p *corev1.Pod) bool {
	if p.Status.Resources != nil || p.Status.AllocatedResources != nil {
		return true
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Resources != nil || list[i].AllocatedResources != nil {
				return true
			}
		}
	}
	return false
}

// NodeInfo is one node as the filters see it.
type NodeInfo struct {
	// Node holds only what the filters read: name, labels, taints, unschedulable.
	Node  *corev1.Node
	Ready bool
	// ImpliedTaints are taints the node lifecycle controller puts on a node in this condition
	// (NotReady, pressure, ...) that the node does not carry yet; they are in Node.Spec.Taints.
	ImpliedTaints []corev1.Taint
	Allocatable   Resources
	Requested     Resources
	// Pods is the number of non-terminal pods bound to the node.
	Pods      int
	HostPorts []HostPort
	// podLabels are its pods' namespaces and labels, which an evaluated anti-affinity term may
	// select.
	podLabels []podRef
	// filterTaints are the NoSchedule and NoExecute taints, the ones the scheduler filters on.
	filterTaints []corev1.Taint
}

// Resources is a resource list in the scheduler's units: milli-CPU, bytes, counts.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPods is allocatable "pods" (only meaningful in Allocatable).
	AllowedPods int64
	// Scalar holds extended resources (nvidia.com/gpu), hugepages and other prefixed resources.
	Scalar map[corev1.ResourceName]int64
}

// HostPort is a port a pod binds on the node.
type HostPort struct {
	Protocol corev1.Protocol
	Port     int32
}

// SnapshotOption tunes LoadSnapshot and NewSnapshot.
type SnapshotOption func(*snapshotConfig)

type snapshotConfig struct {
	pageSize        int64
	exclude         func(*corev1.Pod) bool
	noImpliedTaints bool
}

// WithPageSize sets the LIST page size.
func WithPageSize(n int64) SnapshotOption { return func(c *snapshotConfig) { c.pageSize = n } }

// WithExcludedPods drops existing pods for which exclude returns true, e.g. the pods of the
// release being re-planned (they would be replaced).
func WithExcludedPods(exclude func(*corev1.Pod) bool) SnapshotOption {
	return func(c *snapshotConfig) { c.exclude = exclude }
}

// WithExcludedRelease drops the existing pods of a Helm release of the chart: those carrying
// all of the release's labels (render.Names.Selector: app.kubernetes.io/name as the chart
// renders it, and app.kubernetes.io/instance), so planning the release again does not count
// its running pods twice. No labels exclude nothing.
func WithExcludedRelease(releaseLabels map[string]string) SnapshotOption {
	sel := labels.SelectorFromSet(releaseLabels)
	return WithExcludedPods(func(p *corev1.Pod) bool {
		return len(releaseLabels) > 0 && sel.Matches(labels.Set(p.Labels))
	})
}

// WithoutImpliedTaints evaluates the taints exactly as read. By default a node whose
// conditions say NotReady/Unknown/pressure also gets the NoSchedule taint the node lifecycle
// controller adds for that condition, since the scheduler will see it within seconds.
func WithoutImpliedTaints() SnapshotOption {
	return func(c *snapshotConfig) { c.noImpliedTaints = true }
}

// LoadSnapshot reads nodes and bound pods with two paginated LIST chains (one for nodes, one
// for pods), so the number of API calls is 2 plus one per extra page, whatever the cluster size.
func LoadSnapshot(ctx context.Context, cs kubernetes.Interface, opts ...SnapshotOption) (*Snapshot, error) {
	cfg := snapshotConfig{pageSize: DefaultPageSize}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Snapshot{byName: map[string]int{}}

	nodePager := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		s.APICalls++
		return cs.CoreV1().Nodes().List(ctx, o)
	}))
	nodePager.PageSize = cfg.pageSize
	err := nodePager.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Errorf("listing nodes: unexpected item %T", obj)
		}
		s.addNode(n, &cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}

	podPager := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		s.APICalls++
		return cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	}))
	podPager.PageSize = cfg.pageSize
	err = podPager.EachListItem(ctx, metav1.ListOptions{FieldSelector: podsFieldSelector}, func(obj runtime.Object) error {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("listing pods: unexpected item %T", obj)
		}
		s.addPod(p, &cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	s.finish()
	return s, nil
}

// NewSnapshot builds a snapshot from objects already in hand (tests, offline plans).
func NewSnapshot(nodes []corev1.Node, pods []corev1.Pod, opts ...SnapshotOption) *Snapshot {
	cfg := snapshotConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Snapshot{byName: map[string]int{}}
	for i := range nodes {
		s.addNode(&nodes[i], &cfg)
	}
	for i := range pods {
		s.addPod(&pods[i], &cfg)
	}
	s.finish()
	return s
}

// Node returns the node called name, or nil.
func (s *Snapshot) Node(name string) *NodeInfo {
	if i, ok := s.byName[name]; ok {
		return s.Nodes[i]
	}
	return nil
}

func (s *Snapshot) addNode(n *corev1.Node, cfg *snapshotConfig) {
	if _, dup := s.byName[n.Name]; dup {
		return
	}
	trimmed := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
	}
	ni := &NodeInfo{Node: trimmed, Allocatable: toResources(n.Status.Allocatable)}
	ni.Ready = true
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ni.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if !cfg.noImpliedTaints {
		for _, t := range impliedTaints(n) {
			if !hasTaint(n.Spec.Taints, t) {
				ni.ImpliedTaints = append(ni.ImpliedTaints, t)
			}
		}
		if len(ni.ImpliedTaints) > 0 {
			trimmed.Spec.Taints = append(append([]corev1.Taint(nil), n.Spec.Taints...), ni.ImpliedTaints...)
		}
	}
	for _, t := range trimmed.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			ni.filterTaints = append(ni.filterTaints, t)
		}
	}
	s.byName[n.Name] = len(s.Nodes)
	s.Nodes = append(s.Nodes, ni)
}

// impliedTaints are the NoSchedule taints the node lifecycle controller derives from node
// conditions (its TaintNodesByCondition behaviour).
func impliedTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	add := func(key string) { out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}) }
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse:
			add(corev1.TaintNodeNotReady)
		case c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown:
			add(corev1.TaintNodeUnreachable)
		case c.Type == corev1.NodeMemoryPressure && c.Status == corev1.ConditionTrue:
			add(corev1.TaintNodeMemoryPressure)
		case c.Type == corev1.NodeDiskPressure && c.Status == corev1.ConditionTrue:
			add(corev1.TaintNodeDiskPressure)
		case c.Type == corev1.NodePIDPressure && c.Status == corev1.ConditionTrue:
			add(corev1.TaintNodePIDPressure)
		case c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue:
			add(corev1.TaintNodeNetworkUnavailable)
		}
	}
	return out
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, x := range taints {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

func (s *Snapshot) addPod(p *corev1.Pod, cfg *snapshotConfig) {
	// The fake clientset and some proxies ignore field selectors: filter here too.
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	if cfg.exclude != nil && cfg.exclude(p) {
		return
	}
	i, ok := s.byName[p.Spec.NodeName]
	if !ok {
		s.OrphanPods++
		return
	}
	ni := s.Nodes[i]
	ni.Pods++
	s.ExistingPods++
	// The scheduler's accounting of a bound pod: spec or, while resizing, status resources.
	// Without status resources both give the spec's requests, and the spec path allocates less.
	useStatus := hasStatusResources(p)
	s.reuse = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{
		Reuse:              s.reuse,
		UseStatusResources: useStatus,
		InPlacePodLevelResourcesVerticalScalingEnabled: useStatus,
	})
	ni.Requested.add(s.reuse)
	ni.HostPorts = append(ni.HostPorts, hostPorts(&p.Spec)...)
	if len(p.Labels) > 0 {
		ni.podLabels = append(ni.podLabels, podRef{namespace: p.Namespace, labels: labels.Set(p.Labels)})
	}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector); err == nil {
				s.antiAffinity = append(s.antiAffinity, sel)
			}
		}
	}
}

func (s *Snapshot) finish() {
	// Name order makes every later tie-break deterministic.
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Node.Name < s.Nodes[j].Node.Name })
	for i, n := range s.Nodes {
		s.byName[n.Node.Name] = i
	}
	// Dedupe anti-affinity selectors: clusters repeat the same few.
	seen := map[string]bool{}
	out := s.antiAffinity[:0]
	for _, sel := range s.antiAffinity {
		k := sel.String()
		if !seen[k] {
			seen[k] = true
			out = append(out, sel)
		}
	}
	s.antiAffinity = out
}

func hostPorts(spec *corev1.PodSpec) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					proto := p.Protocol
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					out = append(out, HostPort{Protocol: proto, Port: p.HostPort})
				}
			}
		}
	}
	add(spec.Containers)
	add(spec.InitContainers)
	return out
}

// isScalar mirrors the scheduler: extended, hugepages and prefixed native resources are
// checked; any other unprefixed name is ignored.
func isScalar(name corev1.ResourceName) bool {
	n := string(name)
	return strings.HasPrefix(n, corev1.ResourceHugePagesPrefix) ||
		(strings.Contains(n, "/") && !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix))
}

func toResources(rl corev1.ResourceList) Resources {
	var r Resources
	r.add(rl)
	return r
}

func (r *Resources) add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPods += q.Value()
		default:
			if isScalar(name) {
				if r.Scalar == nil {
					r.Scalar = map[corev1.ResourceName]int64{}
				}
				r.Scalar[name] += q.Value()
			}
		}
	}
}

// get returns the amount of one resource in scheduler units.
func (r *Resources) get(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case corev1.ResourcePods:
		return r.AllowedPods
	}
	return r.Scalar[name]
}

// The engine's view of the snapshot: free resources per node and dimension, and node pools.

func (e *engine) buildFree() {
	e.free = newMatrix(e.N, e.R)
	for n, ni := range e.snap.Nodes {
		f := e.free.row(n)
		for d, name := range e.names {
			switch {
			case d == dimPods:
				f[d] = ni.Allocatable.AllowedPods - int64(ni.Pods)
			case isSlotDim(name):
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
		name := poolOf(ni.Node.Labels, e.cfg.poolLabels)
		id, ok := idx[name]
		if !ok {
			id = int32(len(e.pools))
			idx[name] = id
			e.pools = append(e.pools, name)
		}
		e.poolOf[n] = id
	}
}
