package plan

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Replicas that keep away from each other node by node (a required anti-affinity term on
// kubernetes.io/hostname that selects the pod's own labels, in its own namespace, as
// CloudNativePG's instances and spread Deployments carry) are evaluated: each such term is a
// slot every node has once, like a host port, taken by a planned replica or by a pod of the
// namespace already on the node that the term selects. The term is evaluated only when every
// planned pod it selects carries it too; other anti-affinity stays "not evaluated".

// antiAffinityDimPrefix names the slot dimension of one self-selecting term.
const antiAffinityDimPrefix = "antiaffinity/"

// reasonAntiAffinity is the scheduler's reason for a node whose pods the term keeps it from.
const reasonAntiAffinity = "node(s) didn't match pod anti-affinity rules"

// podRef is a pod on a node as an anti-affinity term sees it.
type podRef struct {
	namespace string
	labels    labels.Set
}

// slotTaken: a pod already on the node is one that the class's evaluated terms keep it from.
func slotTaken(c *class, ni *NodeInfo) bool {
	for _, sel := range c.slotSelectors {
		for _, p := range ni.podLabels {
			if p.namespace == c.pod.Namespace && sel.Matches(p.labels) {
				return true
			}
		}
	}
	return false
}

// evaluatedTerm returns the slot key of a term the plan can evaluate for pod p: on hostname,
// in p's namespace, selecting p itself, by labels alone.
func evaluatedTerm(p *corev1.Pod, t corev1.PodAffinityTerm) (string, labels.Selector, bool) {
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil || t.TopologyKey != corev1.LabelHostname || len(t.Namespaces) > 0 || t.NamespaceSelector != nil ||
		len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0 || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
		return "", nil, false
	}
	return antiAffinityDimPrefix + p.Namespace + "/" + sel.String(), sel, true
}

// selfAntiAffinity splits a pod's required anti-affinity terms into the keys of those the
// plan evaluates and whether others remain.
func selfAntiAffinity(p *corev1.Pod) (keys []string, others bool) {
	keys, _, others = selfAntiAffinityTerms(p)
	return keys, others
}

func selfAntiAffinityTerms(p *corev1.Pod) (keys []string, selectors []labels.Selector, others bool) {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return nil, nil, false
	}
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		key, sel, ok := evaluatedTerm(p, t)
		if !ok {
			others = true
			continue
		}
		keys = append(keys, key)
		selectors = append(selectors, sel)
	}
	return keys, selectors, others
}

// crossClassAntiAffinity marks what the slots cannot decide: a planned pod that another
// class's term selects without the two sharing that term's slot is uncertain, and so is the
// class whose evaluated term selects it (the scheduler keeps them apart; the slot does not).
func (e *engine) crossClassAntiAffinity() {
	const selected = "another planned pod's required anti-affinity selects this pod (not evaluated)"
	const selects = "required pod anti-affinity (not evaluated)"
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
			key, _, evaluated := evaluatedTerm(c.pod, t)
			for _, o := range e.classes {
				if o == c || !sel.Matches(labels.Set(o.pod.Labels)) {
					continue
				}
				if evaluated && slices.Contains(o.slots, key) {
					continue // both keep the same slot
				}
				o.unevaluated = appendOnce(o.unevaluated, selected)
				if evaluated {
					c.unevaluated = appendOnce(c.unevaluated, selects)
				}
			}
		}
	}
}
