package plan

// Filters: the kube-scheduler's predicates that do not depend on resources, run once per
// class on every node (see the note in engine.go).

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

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
		c.slots, c.slotSelectors, _ = selfAntiAffinityTerms(p.Pod)
		for _, k := range c.slots {
			if _, ok := e.dimOf[corev1.ResourceName(k)]; !ok {
				e.dimOf[corev1.ResourceName(k)] = len(e.names)
				e.names = append(e.names, corev1.ResourceName(k))
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
	e.crossClassAntiAffinity()
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
		for _, k := range c.slots {
			c.fixed[e.dimOf[corev1.ResourceName(k)]] = 1
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
		if _, others := selfAntiAffinity(p); others {
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
		if slotTaken(c, ni) {
			c.static[reasonAntiAffinity]++
			continue
		}
		c.passes = append(c.passes, int32(n))
	}
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
