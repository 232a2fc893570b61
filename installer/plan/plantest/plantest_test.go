package plantest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan/plantest"
)

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := plantest.Generate(42, "ns"), plantest.Generate(42, "ns")
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, plantest.Generate(43, "ns"))
}

// The comparison can fail: a wrong verdict is reported.
func TestCompareReportsDisagreement(t *testing.T) {
	c := plantest.Generate(7, "ns")
	upfront := plantest.PlanCase(c, plan.NewSnapshot(c.Nodes, c.Existing))
	got, replay := plantest.Simulate(c, func(f []string) string { return f[0] })
	// Flip the first pod's outcome.
	got[0].Bound = !got[0].Bound
	got[0].Node = "nowhere"
	_, bad := plantest.Compare(c, upfront, replay, got)
	require.NotEmpty(t, bad)
	assert.Contains(t, bad[0].String(), c.Pods[0].Name)
}
