package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Scheduler filter reasons (the kube-scheduler's wording). For taints we keep the older,
// more useful per-taint form; kube-scheduler 1.37 collapses it to "node(s) had untolerated
// taint(s)".
const (
	reasonNodeName      = "node(s) didn't match the requested node name"
	reasonUnschedulable = "node(s) were unschedulable"
	reasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonPorts         = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"
)

func reasonTaint(t corev1.Taint) string {
	return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
}

func reasonInsufficient(name corev1.ResourceName) string { return "Insufficient " + string(name) }

// fitMessage renders the scheduler's "0/N nodes are available: ..." message from a histogram,
// sorted the way the scheduler sorts it (by the whole "count reason" string).
func fitMessage(total int, hist map[string]int) (string, []Reason) {
	lines := make([]string, 0, len(hist))
	reasons := make([]Reason, 0, len(hist))
	for r, n := range hist {
		lines = append(lines, fmt.Sprintf("%d %s", n, r))
		reasons = append(reasons, Reason{Reason: r, Nodes: n})
	}
	sort.Strings(lines)
	sort.Slice(reasons, func(i, j int) bool {
		if reasons[i].Nodes != reasons[j].Nodes {
			return reasons[i].Nodes > reasons[j].Nodes
		}
		return reasons[i].Reason < reasons[j].Reason
	})
	msg := fmt.Sprintf("0/%d nodes are available", total)
	if len(lines) > 0 {
		msg += ": " + strings.Join(lines, ", ")
	}
	return msg + ".", reasons
}

func selectorText(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func tolerationText(t corev1.Toleration) string {
	s := t.Key
	if s == "" {
		s = "*"
	}
	if t.Operator == corev1.TolerationOpExists {
		s += " exists"
	} else {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}

func nodeSelectorText(ns *corev1.NodeSelector) string {
	var terms []string
	for _, t := range ns.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, requirementText(r))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, requirementText(r))
		}
		terms = append(terms, strings.Join(reqs, ","))
	}
	if len(terms) == 1 {
		return terms[0]
	}
	return "(" + strings.Join(terms, ") or (") + ")"
}

func requirementText(r corev1.NodeSelectorRequirement) string {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) == 1 {
			return r.Key + "=" + r.Values[0]
		}
		return r.Key + " in (" + strings.Join(r.Values, ",") + ")"
	case corev1.NodeSelectorOpNotIn:
		return r.Key + " notin (" + strings.Join(r.Values, ",") + ")"
	case corev1.NodeSelectorOpExists:
		return r.Key
	case corev1.NodeSelectorOpDoesNotExist:
		return "!" + r.Key
	default:
		return r.Key + " " + string(r.Operator) + " " + strings.Join(r.Values, ",")
	}
}

// constraintsText describes where a pod may go: its node selector and required node affinity.
func constraintsText(p *corev1.Pod) string {
	var parts []string
	if len(p.Spec.NodeSelector) > 0 {
		parts = append(parts, selectorText(p.Spec.NodeSelector))
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		parts = append(parts, nodeSelectorText(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
	}
	return strings.Join(parts, " and ")
}

// amountText renders an amount in scheduler units as a Kubernetes quantity.
func amountText(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}

// indexRanges renders sorted indexes as "0-1,3,5-6".
func indexRanges(idx []int) string {
	if len(idx) == 0 {
		return ""
	}
	var b strings.Builder
	start, prev := idx[0], idx[0]
	flush := func() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if start == prev {
			b.WriteString(strconv.Itoa(start))
		} else {
			fmt.Fprintf(&b, "%d-%d", start, prev)
		}
	}
	for _, i := range idx[1:] {
		if i == prev+1 {
			prev = i
			continue
		}
		flush()
		start, prev = i, i
	}
	flush()
	return b.String()
}
