package phase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase/phasetest"
)

// recorder keeps the events in order.
type recorder struct{ phasetest.Recorder }

func (r *recorder) add(e string) { r.Add(e) }

func step(rec *recorder, title string, fail error) *Func {
	return &Func{
		Name:    title,
		Do:      func(context.Context) error { return fail },
		Undo:    func(context.Context) (string, error) { rec.add("undo " + title); return "undid " + title, nil },
		Finally: func(context.Context) error { rec.add("final " + title); return nil },
	}
}

func TestManagerCleansUpCompletedPhasesInReverse(t *testing.T) {
	rec := &recorder{}
	skipped := step(rec, "skipped", nil)
	skipped.SkipIf = func() (bool, string) { return true, "not needed" }
	m := &Manager{Observer: rec, Phases: []Phase{
		step(rec, "a", nil), step(rec, "b", nil), skipped, step(rec, "c", errors.New("boom")), step(rec, "d", nil),
	}}
	err := m.Run(context.Background())
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "c", pe.Phase)
	assert.Equal(t, []string{
		"start a", "start b", "skip skipped", "start c", "fail c",
		// c failed: it is not undone (a phase cleans up its own failure); b then a.
		"undo b", "cleanup b", "undo a", "cleanup a",
		"final b", "final a",
	}, rec.Events())
	assert.Equal(t, "c failed: boom\n  undid b\n  undid a", err.Error())
	statuses := []string{}
	for _, r := range m.Report() {
		statuses = append(statuses, r.Phase+"="+r.Status)
	}
	assert.Equal(t, []string{"a=ok", "b=ok", "skipped=skipped", "c=failed", "d=not-run"}, statuses)
}

func TestManagerSuccessRunsOnlyFinalizers(t *testing.T) {
	rec := &recorder{}
	m := &Manager{Observer: rec, Phases: []Phase{step(rec, "a", nil), step(rec, "b", nil)}}
	require.NoError(t, m.Run(context.Background()))
	assert.Equal(t, []string{"start a", "start b", "final b", "final a"}, rec.Events())
}

func TestManagerStopsWhenCancelledAndCleansUpWithFreshContext(t *testing.T) {
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	var cleanupCtxErr error
	a := step(rec, "a", nil)
	a.Do = func(context.Context) error { cancel(); return nil }
	a.Undo = func(ctx context.Context) (string, error) { cleanupCtxErr = ctx.Err(); return "", nil }
	m := &Manager{Observer: rec, Phases: []Phase{a, step(rec, "b", nil)}}
	err := m.Run(ctx)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "b", pe.Phase)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NoError(t, cleanupCtxErr, "cleanups get a live context")
	assert.NotContains(t, rec.Events(), "start b")
}

func TestManagerReportsCleanupAndFinalizerFailures(t *testing.T) {
	rec := &recorder{}
	a := step(rec, "a", nil)
	a.Undo = func(context.Context) (string, error) { return "", fmt.Errorf("cannot undo") }
	a.Finally = func(context.Context) error { return fmt.Errorf("lock not released") }
	m := &Manager{Observer: rec, Phases: []Phase{a, step(rec, "b", errors.New("boom"))}}
	err := m.Run(context.Background())
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "undoing a FAILED: cannot undo"), err.Error())
	assert.Contains(t, err.Error(), "lock not released")
}
