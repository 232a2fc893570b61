package plan

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Replicas that keep away from each other node by node (a required anti-affinity term on
// kubernetes.io/hostname that selects the pod's own labels, as CloudNativePG's instances and
// spread Deployments carry) are evaluated: each such term is a slot every node has once, like
// a host port. Other anti-affinity stays "not evaluated".

// antiAffinityDimPrefix names the slot dimension of one self-selecting term.
const antiAffinityDimPrefix = "antiaffinity/"

// reasonAntiAffinity is the scheduler's reason for a node whose pods the term keeps it from.
const reasonAntiAffinity = "node(s) didn't match pod anti-affinity rules"

// slotTaken: a pod already on the node is one that the class's evaluated terms keep it from.
func slotTaken(c *class, ni *NodeInfo) bool {
	for _, sel := range c.slotSelectors {
		for _, l := range ni.podLabels {
			if sel.Matches(l) {
				return true
			}
		}
	}
	return false
}

// selfAntiAffinity splits a pod's required anti-affinity terms into the keys of those the
// plan evaluates (self-selecting, per node) and whether others remain.
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
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil || t.TopologyKey != corev1.LabelHostname || len(t.Namespaces) > 0 || t.NamespaceSelector != nil ||
			sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			others = true
			continue
		}
		keys = append(keys, antiAffinityDimPrefix+sel.String())
		selectors = append(selectors, sel)
	}
	return keys, selectors, others
}
