package check_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// A clean run is neither failed nor warned, and its summary names only what happened.
func TestReportWithoutWarnings(t *testing.T) {
	rep := check.NewRunner([]check.Check{{ID: "a", Run: pass("")}, {ID: "b", Run: pass("")}}).Run(context.Background())
	assert.False(t, rep.Failed())
	assert.False(t, rep.Warned())
	assert.Empty(t, rep.Warnings())
	assert.Equal(t, "2 passed", rep.Summary())
	assert.Equal(t, "no checks", check.Report{}.Summary())
}

// Each check runs under a deadline: 2 minutes by default, WithCheckTimeout's otherwise; a check
// that outlives it fails with the reason instead of hanging the command.
func TestCheckDeadline(t *testing.T) {
	var left time.Duration
	deadline := func(ctx context.Context) (string, error) {
		d, ok := ctx.Deadline()
		require.True(t, ok, "a check always has a deadline")
		left = time.Until(d)
		return "", nil
	}
	check.NewRunner([]check.Check{{ID: "x", Run: deadline}}).Run(context.Background())
	assert.InDelta(t, (2 * time.Minute).Seconds(), left.Seconds(), 5, "the default deadline")

	hang := func(ctx context.Context) (string, error) { <-ctx.Done(); return "", ctx.Err() }
	rep := check.NewRunner([]check.Check{{ID: "slow", Run: hang}}, check.WithCheckTimeout(20*time.Millisecond)).Run(context.Background())
	assert.Equal(t, check.Failed, rep.Results[0].Status)
	assert.Contains(t, rep.Results[0].Detail, "deadline exceeded")
}
