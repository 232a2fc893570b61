package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// onPool is spec with a nodeSelector polyaxon=pool.
func onPool(name, pool string, req map[string]string) *corev1.Pod {
	p := spec(name, req)
	p.Spec.NodeSelector = map[string]string{"polyaxon": pool}
	return p
}

// pairPods: two 1-CPU pods, then two 2-CPU pods, on two nodes of 2 CPUs. Whatever the
// scheduler does with the first two, the third fits only if they shared a node (uncertain),
// and after it no node ever has 2 CPUs left for the fourth: in every placement the fourth
// stays pending. The bounds alone leave the fourth uncertain.
func pairPods(pool string) []plan.PodToPlace {
	var pods []plan.PodToPlace
	for _, p := range []*corev1.Pod{onPool("x", pool, map[string]string{"cpu": "1"}), onPool("y", pool, map[string]string{"cpu": "1"}),
		onPool("z", pool, map[string]string{"cpu": "2"}), onPool("w", pool, map[string]string{"cpu": "2"})} {
		pods = append(pods, replicas(p, 1)...)
	}
	return pods
}

func pairNodes(pool string) []corev1.Node {
	return []corev1.Node{node(pool+"-a", 2, 8, 0, map[string]string{"polyaxon": pool}), node(pool+"-b", 2, 8, 0, map[string]string{"polyaxon": pool})}
}

// verdicts lists the pods' verdicts; a verdict the plan's own placement contradicts (the
// engine's "internal" note) fails the test.
func verdicts(t *testing.T, r *plan.Result) []plan.Verdict {
	t.Helper()
	var out []plan.Verdict
	for _, p := range r.Pods {
		out = append(out, p.Verdict)
		for _, n := range p.Notes {
			assert.NotContains(t, n, "internal:", "pod %s", p.Name)
		}
	}
	return out
}

func TestEveryPlacementDecidesWhereTheBoundsCannot(t *testing.T) {
	res := plan.Plan(plan.NewSnapshot(pairNodes("pair"), nil), pairPods("pair"))
	assert.Equal(t, []plan.Verdict{plan.Fits, plan.Fits, plan.Uncertain, plan.Unschedulable}, verdicts(t, res))
	assert.Equal(t, 1, res.Summary.Uncertain)
	// A probe (hypothetical) pod consumes nothing: after it the same holds.
	probe := replicas(onPool("probe", "pair", map[string]string{"cpu": "2"}), 1)
	probe[0].Hypothetical = true
	pods := pairPods("pair")
	res = plan.Plan(plan.NewSnapshot(pairNodes("pair"), nil), append(append(pods[:2:2], probe...), pods[2:]...))
	assert.Equal(t, []plan.Verdict{plan.Fits, plan.Fits, plan.Uncertain, plan.Uncertain, plan.Unschedulable}, verdicts(t, res),
		"the probe fits in some placements; the fourth pod still in none")
}

// A pod the engine cannot fully judge (required pod anti-affinity) may stay pending where it
// fits: the placements after it include that.
func TestEveryPlacementKeepsPodsWithUnevaluatedConstraintsPending(t *testing.T) {
	pods := pairPods("pair")
	anti := onPool("z", "pair", map[string]string{"cpu": "2"})
	anti.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
	pods[2] = replicas(anti, 1)[0]
	res := plan.Plan(plan.NewSnapshot(pairNodes("pair"), nil), pods)
	verdicts(t, res)
	assert.Equal(t, plan.Uncertain, res.Pods[2].Verdict, "not evaluated")
	assert.Equal(t, plan.Uncertain, res.Pods[3].Verdict, "if z stays pending where it fits, w can take its node")
}

// Past 64 nodes, or 2048 distinct states, the bounds' verdicts stand.
func TestEveryPlacementOnlyForSmallPlans(t *testing.T) {
	nodes := pairNodes("pair")
	for i := 0; i < 63; i++ {
		nodes = append(nodes, node("other-"+itoa(i), 2, 8, 0, map[string]string{"polyaxon": "other"}))
	}
	res := plan.Plan(plan.NewSnapshot(nodes, nil), pairPods("pair"))
	assert.Equal(t, plan.Uncertain, res.Pods[3].Verdict, "65 nodes: bounds only")
	res = plan.Plan(plan.NewSnapshot(nodes[:64], nil), pairPods("pair"))
	assert.Equal(t, plan.Unschedulable, res.Pods[3].Verdict, "64 nodes: every placement")

	// After x, y and z there are 3 states (the pods' counts tell the two full ones apart); u
	// (1 CPU) is pending in those two and splits the third: 4. Each pod given a pair of
	// 1-CPU nodes of its own doubles them: 2048 after 9 such pods, 4096 after 10.
	withPairs := func(n int) *plan.Result {
		nodes, pods := pairNodes("pair"), pairPods("pair")
		w := pods[3]
		pods = append(pods[:3], replicas(onPool("u", "pair", map[string]string{"cpu": "1"}), 1)...)
		for i := 0; i < n; i++ {
			pool := "pair" + itoa(i)
			nodes = append(nodes, node(pool+"-a", 1, 8, 0, map[string]string{"polyaxon": pool}), node(pool+"-b", 1, 8, 0, map[string]string{"polyaxon": pool}))
			pods = append(pods, replicas(onPool(pool, pool, map[string]string{"cpu": "1"}), 1)...)
		}
		return plan.Plan(plan.NewSnapshot(nodes, nil), append(pods, w))
	}
	res = withPairs(9)
	assert.Equal(t, plan.Unschedulable, res.Pods[13].Verdict, "2048 states: every placement")
	res = withPairs(10)
	assert.Equal(t, plan.Uncertain, res.Pods[14].Verdict, "4096 states: bounds only")

	nodes = pairNodes("pair")
	for i := 0; i < 12; i++ {
		nodes = append(nodes, node("small-"+itoa(i), 3, 8, 0, map[string]string{"polyaxon": "small"}))
	}
	small := replicas(onPool("s", "small", map[string]string{"cpu": "1"}), 12)
	res = plan.Plan(plan.NewSnapshot(nodes, nil), append(small, pairPods("pair")...))
	assert.Equal(t, plan.Uncertain, res.Pods[15].Verdict, "12 pods over 12 nodes make more than 2048 states: bounds only")
	res = plan.Plan(plan.NewSnapshot(nodes, nil), append(small[:2:2], pairPods("pair")...))
	assert.Equal(t, plan.Unschedulable, res.Pods[5].Verdict, "2 pods over 12 nodes: few states")
}
