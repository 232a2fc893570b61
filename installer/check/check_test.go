package check_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

func pass(detail string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return detail, nil }
}

func fail(msg string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return "", errors.New(msg) }
}

type recorder struct {
	started  []string
	finished []check.Result
}

func (r *recorder) Started(c check.Check)   { r.started = append(r.started, c.ID) }
func (r *recorder) Finished(x check.Result) { r.finished = append(r.finished, x) }

func statuses(rep check.Report) map[string]check.Status {
	out := map[string]check.Status{}
	for _, r := range rep.Results {
		out[r.ID] = r.Status
	}
	return out
}

func TestRunnerReportsAllFailures(t *testing.T) {
	rec := &recorder{}
	checks := []check.Check{
		{ID: "a", Category: "x", Severity: check.Error, Run: pass("fine"), Hint: "h-a"},
		{ID: "b", Category: "x", Severity: check.Error, Run: fail("broken b"), Hint: "fix b", DocsAnchor: "check-b"},
		{ID: "c", Category: "y", Severity: check.Warning, Run: fail("meh")},
		{ID: "d", Category: "y", Severity: check.Error, Run: fail("broken d")},
		{ID: "e", Category: "y", Run: func(context.Context) (string, error) { return "", check.Warnf("a guess") }},
		{ID: "f", Category: "y", Run: func(context.Context) (string, error) { return "", check.Skip("n/a") }},
	}
	rep := check.NewRunner(checks, check.WithObserver(rec)).Run(context.Background())
	assert.Equal(t, map[string]check.Status{
		"a": check.Passed, "b": check.Failed, "c": check.Warned, "d": check.Failed, "e": check.Warned, "f": check.Skipped,
	}, statuses(rep))
	assert.True(t, rep.Failed())
	assert.True(t, rep.Warned())
	require.Len(t, rep.Failures(), 2, "every failure is reported, not the first only")
	b := rep.Results[1]
	assert.Equal(t, "broken b", b.Detail)
	assert.Equal(t, "fix b", b.Hint)
	assert.Equal(t, check.DocsBase+"check-b", b.Docs)
	assert.Empty(t, rep.Results[0].Hint, "no hint on success")
	assert.Equal(t, "fine", rep.Results[0].Detail)
	assert.Equal(t, check.Error, rep.Results[4].Severity, "an empty severity means error")
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, rec.started)
	assert.Len(t, rec.finished, 6)
	assert.Equal(t, "1 passed, 2 warning, 2 failed, 1 skipped", rep.Summary())
}

func TestRunnerFatalStopsTheRest(t *testing.T) {
	ran := false
	checks := []check.Check{
		{ID: "offline", Run: pass("")},
		{ID: "api", Severity: check.Fatal, Run: fail("unreachable")},
		{ID: "later", Run: func(context.Context) (string, error) { ran = true; return "", nil }},
	}
	rep := check.NewRunner(checks).Run(context.Background())
	assert.False(t, ran, "checks after a failed fatal one do not run")
	assert.Equal(t, check.Skipped, rep.Results[2].Status)
	assert.Equal(t, "not run: api failed", rep.Results[2].Detail)
	assert.True(t, rep.Failed())
}

func TestRunnerPolicyPromotesToFatal(t *testing.T) {
	checks := []check.Check{
		{ID: "rbac", Severity: check.Error, Run: fail("denied")},
		{ID: "later", Run: pass("")},
	}
	rep := check.NewRunner(checks, check.WithFatal("rbac")).Run(context.Background())
	assert.Equal(t, check.Fatal, rep.Results[0].Severity)
	assert.Equal(t, check.Passed, rep.Results[1].Status, "a profile-fatal failure still lets every other check report")

	// The profile's fatal checks cannot be demoted with --ignore.
	rep = check.NewRunner(checks, check.WithFatal("rbac"), check.WithIgnore("rbac")).Run(context.Background())
	assert.Equal(t, check.Failed, rep.Results[0].Status)
	assert.True(t, rep.Failed())
}

func TestRunnerIgnoreDemotesToWarning(t *testing.T) {
	checks := []check.Check{
		{ID: "rbac", Severity: check.Error, Run: fail("denied"), Hint: "ask an admin"},
		{ID: "api", Severity: check.Fatal, Run: fail("down")},
		{ID: "later", Run: pass("ok")},
		{ID: "dry-run", Run: fail("rejected")},
	}
	rep := check.NewRunner(checks, check.WithIgnore("rbac", "api")).Run(context.Background())
	r := rep.Results[0]
	assert.Equal(t, check.Warned, r.Status)
	assert.True(t, r.Ignored)
	assert.Equal(t, "denied", r.Detail, "an ignored failure is still shown with its detail")
	assert.Equal(t, "ask an admin", r.Hint)
	assert.Equal(t, check.Warned, rep.Results[1].Status, "an ignored fatal check does not stop the rest")
	assert.Equal(t, check.Passed, rep.Results[2].Status)
	assert.Equal(t, check.Failed, rep.Results[3].Status, "ignoring one check does not ignore others")

	rep = check.NewRunner(checks, check.WithIgnore("all")).Run(context.Background())
	assert.False(t, rep.Failed())
}

func TestRunnerValidateIgnore(t *testing.T) {
	checks := []check.Check{{ID: "rbac", Run: pass("")}, {ID: "dry-run", Run: pass("")}}
	require.NoError(t, check.NewRunner(checks, check.WithIgnore("rbac", "all")).Validate())
	err := check.NewRunner(checks, check.WithIgnore("rbca")).Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rbca")
	assert.Contains(t, err.Error(), "known: rbac, dry-run")
}

func TestRunnerPanicAndCancel(t *testing.T) {
	checks := []check.Check{
		{ID: "boom", Run: func(context.Context) (string, error) { panic("bad index") }},
		{ID: "nil"},
	}
	rep := check.NewRunner(checks).Run(context.Background())
	assert.Equal(t, check.Failed, rep.Results[0].Status)
	assert.Contains(t, rep.Results[0].Detail, "panicked: bad index")
	assert.Equal(t, check.Failed, rep.Results[1].Status)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep = check.NewRunner([]check.Check{{ID: "x", Run: pass("")}}).Run(ctx)
	assert.Equal(t, check.Skipped, rep.Results[0].Status)
}
