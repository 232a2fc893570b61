package preflight

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// categoryFailure says why no Ready node takes a run of the category, in the category's own
// terms: the labels its runs look for when no Ready node has them, or the taints the labelled
// nodes carry that its runs do not tolerate; the scheduler's summary follows.
func (e *Env) categoryFailure(ctx context.Context, category, scheduler string) string {
	placement, err := plan.CategoryDefaults(e.objects(), e.runs(), e.Namespace)
	cs, ok := placement.Get(category)
	nodes, nerr := e.readyNodes(ctx)
	if err != nil || !ok || nerr != nil {
		return fmt.Sprintf("category %s: %s", category, scheduler)
	}
	probe := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: cs.NodeSelector, Tolerations: cs.Tolerations, Affinity: cs.Affinity}}
	required := nodeaffinity.GetRequiredNodeAffinity(probe)
	var labelled []string
	taints := map[string]bool{}
	tainted := 0
	for i := range nodes {
		if ok, _ := required.Match(&nodes[i]); !ok {
			continue
		}
		labelled = append(labelled, nodes[i].Name)
		t, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), nodes[i].Spec.Taints, cs.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false)
		if untolerated {
			tainted++
			taints[t.ToString()] = true
		}
	}
	rules := cs.String()
	switch {
	case len(labelled) == 0 && rules != "none":
		return fmt.Sprintf("category %s: no Ready node has the labels its runs look for (%s); %s", category, rules, scheduler)
	case len(labelled) > 0 && tainted == len(labelled):
		return fmt.Sprintf("category %s: the Ready nodes with the labels its runs look for (%s) all carry a taint they do not tolerate (%s; %s); %s",
			category, strings.Join(first(labelled, 5), ", "), strings.Join(slices.Sorted(maps.Keys(taints)), ", "), rules, scheduler)
	}
	return fmt.Sprintf("category %s (%s): %s", category, rules, scheduler)
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
