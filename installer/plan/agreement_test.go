package plan_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
)

// The upfront verdicts must hold whatever feasible node a scheduler picks: random
// adversaries (and the plan's own choice of the first, and the last, feasible node) over many
// seeds never contradict a "fits" or an "unschedulable". It sits with the engine's tests so
// that every change to the engine, and every mutant `make mutate` makes of it, meets it.
func TestUpfrontVerdictsHoldForAnyScheduler(t *testing.T) {
	total := agreeWithAnyScheduler(t, 1500)
	// The generator exercises both outcomes, and certain verdicts dominate.
	assert.Greater(t, total.Bound, 1000)
	assert.Greater(t, total.Pending, 300)
	// The share does not depend on the scheduler (the e2e agreement test holds it to the same
	// bar against the real one): it is measured here too, where it is cheap.
	t.Logf("uncertain upfront verdicts: %d of %d (%.2f%%)", total.UpfrontUncertain, total.Pods, total.UncertainShare())
	assert.LessOrEqual(t, total.UncertainShare(), 5.0, "at most 5%% of the verdicts are uncertain")
}

// On a plan past the limits of the exact listing (more than 64 nodes, too many states) the
// two bounds alone decide. They must stay sound, and as sharp as they are: a bound made
// weaker leaves more pods uncertain, so the count is a ratchet (lower it when the bounds
// improve, never raise it).
func TestBoundsAloneHoldForAnyScheduler(t *testing.T) {
	defer plan.WithoutExactSearch()()
	total := agreeWithAnyScheduler(t, 1500)
	t.Logf("uncertain with the bounds alone: %d of %d (%.2f%%)", total.UpfrontUncertain, total.Pods, total.UncertainShare())
	assert.LessOrEqual(t, total.UpfrontUncertain, boundsUncertain, "more verdicts left uncertain than the bounds leave today")
	assert.Greater(t, total.UpfrontUncertain, 0, "some verdicts depend on scoring: the exact listing is off")
}

// boundsUncertain is how many of the 1,500 cases' 8,000 verdicts the bounds alone leave uncertain.
const boundsUncertain = 566

// agreeWithAnyScheduler plans the first n generated cases and plays each against random
// adversaries and the plan's own choice of the first, and the last, feasible node: no
// "fits" or "unschedulable" may be contradicted. It returns the random scheduler's stats.
func agreeWithAnyScheduler(t *testing.T, n int64) plantest.Stats {
	t.Helper()
	var total plantest.Stats
	r := rand.New(rand.NewSource(1))
	choosers := map[string]func([]string) string{
		"random": plantest.RandomChoice(r),
		"first":  func(f []string) string { return f[0] },
		"last":   func(f []string) string { return f[len(f)-1] },
	}
	for seed := int64(1); seed <= n; seed++ {
		c := plantest.Generate(seed, "ns")
		upfront := plantest.PlanCase(c, plan.NewSnapshot(c.Nodes, c.Existing))
		for name, choose := range choosers {
			got, replay := plantest.Simulate(c, choose)
			st, bad := plantest.Compare(c, upfront, replay, got)
			require.Empty(t, bad, "seed %d, %s scheduler", seed, name)
			if name == "random" {
				total.Add(st)
			}
		}
	}
	return total
}
