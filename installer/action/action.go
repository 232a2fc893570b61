// Package action holds the flow of every command, one type per verb (helm's pkg/action): a
// command fills the type's fields from its flags and calls Run. Every action on a release
// (install, upgrade, rollback, uninstall, recover, backup, restore) is a phase pipeline
// (installer/phase) holding the release's lock. Actions print progress for humans; the result
// they return, and the exit code an error maps to, are the caller's to print.
package action

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// Env is what every action is handed by its caller. Every field may be left nil.
type Env struct {
	// Progress receives human progress (stderr).
	Progress *output.Progress
	// Debugf writes a line to the debug log; Logger is the same log for libraries that take a
	// *slog.Logger (installer/backup).
	Debugf func(format string, args ...any)
	Logger *slog.Logger
	// Secrets learns the run's secret values as they become known (inputs, rendered Secrets),
	// so that nothing printed shows them.
	Secrets *redact.Scrubber
	// Confirm asks the user a yes/no question. Actions ask only when their Yes is false; with
	// no Confirm they refuse.
	Confirm func(question string) (bool, error)
	// RegisterCleanup hands work to a caller that may exit before the action returns (a second
	// Ctrl-C exits at once); the returned function withdraws it.
	RegisterCleanup func(cleanup func()) (unregister func())
}

func (e *Env) progress() *output.Progress {
	if e.Progress == nil {
		e.Progress = output.NewProgress(discard{})
	}
	return e.Progress
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (e *Env) debugf(format string, args ...any) {
	if e.Debugf != nil {
		e.Debugf(format, args...)
	}
}

func (e *Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// confirm asks question unless yes; a refusal is an error saying nothing was changed.
func (e *Env) confirm(yes bool, question, what string) error {
	if yes {
		return nil
	}
	if e.Confirm == nil {
		return &UsageError{Err: fmt.Errorf("%s: not confirmed: pass --yes", question)}
	}
	ok, err := e.Confirm(question)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s cancelled: nothing was changed", what)
	}
	return nil
}

// lock is the lock phase of a release: its Lease, and the Helm history it repairs on the way
// out (nil when the action makes no revision).
func (e *Env) lock(l *release.Lock, revisions phase.Revisions) *phase.Lock {
	return &phase.Lock{Lock: l, Revisions: revisions, Say: e.progress().Warn, Debugf: e.Debugf}
}

// run runs an action's phases, its lock phase among them. A pipeline with no cleanup to report
// fails with its phase's own error, as a plain call would. The lock's finalizer errors (a
// Lease that could not be deleted expires by itself) are warnings once the action is done.
func (e *Env) run(ctx context.Context, phases ...phase.Phase) error {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	for _, p := range phases {
		if l, ok := p.(*phase.Lock); ok {
			l.Abort = abort // a lost lease stops the phases after it
		}
	}
	m := &phase.Manager{Phases: phases, CleanupTimeout: time.Minute}
	err := m.Run(ctx)
	var pe *phase.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		if pe.Finalize != nil {
			e.progress().Warn(pe.Finalize.Error())
		}
		if len(pe.Cleanups) == 0 {
			return pe.Err
		}
		return err
	default:
		e.progress().Warn(err.Error())
		return nil
	}
}

// step is a phase made of one call.
func step(title string, do func(ctx context.Context) error) phase.Phase {
	return &phase.Func{Name: title, Do: do}
}

// UsageError is a refused combination of the caller's options, found before anything changed
// (the CLI's exit code 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ChecksFailedError is a failed check that stopped an action or followed it (the CLI's exit
// code 3).
type ChecksFailedError struct {
	Report check.Report
	// Msg says what the failure means for the action ("": the failed IDs).
	Msg string
}

func (e *ChecksFailedError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("%d check(s) failed: %s", len(e.Report.Failures()), FailedIDs(e.Report))
}

// FailedIDs lists the IDs of the failed checks, comma-separated.
func FailedIDs(rep check.Report) string {
	s := ""
	for i, r := range rep.Failures() {
		if i > 0 {
			s += ", "
		}
		s += r.ID
	}
	return s
}
