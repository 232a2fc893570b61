// Package phase runs a release action as an ordered list of phases (k0sctl style). Every action
// on a release (install, upgrade, rollback, uninstall, recover, backup, restore) is such a list,
// starting with the Lock phase. A phase that fails stops the list; the cleanups of the phases
// already completed then run in reverse order, so the cluster returns to where it was, and
// finalizers (releasing the lock) always run. The manager never prints: an Observer is told.
package phase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Phase is one step of a pipeline.
type Phase interface {
	Title() string
	Run(ctx context.Context) error
}

// Cleaner undoes a completed phase when a later one fails. It returns a sentence saying what
// it did (empty: nothing to report).
type Cleaner interface {
	Cleanup(ctx context.Context) (string, error)
}

// Finalizer runs after the pipeline, whatever happened, for every phase that completed.
type Finalizer interface {
	Finalize(ctx context.Context) error
}

// Skipper lets a phase decide, when its turn comes, that it has nothing to do.
type Skipper interface {
	Skip() (bool, string)
}

// Observer is told about progress (the CLI prints it; tests record it). The manager never prints.
type Observer interface {
	PhaseStarted(title string)
	PhaseSkipped(title, reason string)
	PhaseFinished(title string, err error, took time.Duration)
	CleanupFinished(title, did string, err error)
}

// PhaseReport is one line of the pipeline's report.
type PhaseReport struct {
	Phase  string `json:"phase"`
	Status string `json:"status"` // ok, skipped, failed, not-run
	Detail string `json:"detail,omitempty"`
	Took   string `json:"took,omitempty"`
}

// CleanupReport is what one cleanup did.
type CleanupReport struct {
	Phase string `json:"phase"`
	Did   string `json:"did,omitempty"`
	Error string `json:"error,omitempty"`
}

// Error is a failed pipeline: the phase that failed, its error, and what the cleanups did.
type Error struct {
	Phase    string
	Err      error
	Cleanups []CleanupReport
	// Finalize holds errors of the finalizers (e.g. the lock could not be released).
	Finalize error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed: %v", e.Phase, e.Err)
	for _, c := range e.Cleanups {
		switch {
		case c.Error != "":
			fmt.Fprintf(&b, "\n  undoing %s FAILED: %s", c.Phase, c.Error)
		case c.Did != "":
			fmt.Fprintf(&b, "\n  %s", c.Did)
		}
	}
	if e.Finalize != nil {
		fmt.Fprintf(&b, "\n  %v", e.Finalize)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Manager runs phases in order.
type Manager struct {
	Phases []Phase
	// Observer receives progress events (may be nil).
	Observer Observer
	// CleanupTimeout bounds cleanups and finalizers, which run on a context of their own
	// because the pipeline's context is often the one Ctrl-C just cancelled.
	CleanupTimeout time.Duration

	report []PhaseReport
}

// Report returns one entry per phase after Run.
func (m *Manager) Report() []PhaseReport { return m.report }

type nopObserver struct{}

func (nopObserver) PhaseStarted(string)                        {}
func (nopObserver) PhaseSkipped(string, string)                {}
func (nopObserver) PhaseFinished(string, error, time.Duration) {}
func (nopObserver) CleanupFinished(string, string, error)      {}

// Run executes the phases. It returns nil or an *Error.
func (m *Manager) Run(ctx context.Context) error {
	obs := m.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	timeout := m.CleanupTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	m.report = nil
	var (
		done        []Phase
		failedTitle string
		runErr      error
	)
	for _, p := range m.Phases {
		if runErr == nil && ctx.Err() != nil {
			failedTitle = p.Title()
			runErr = fmt.Errorf("interrupted before it started: %w", context.Cause(ctx))
		}
		if runErr != nil {
			m.report = append(m.report, PhaseReport{Phase: p.Title(), Status: "not-run"})
			continue
		}
		if s, ok := p.(Skipper); ok {
			if skip, why := s.Skip(); skip {
				obs.PhaseSkipped(p.Title(), why)
				m.report = append(m.report, PhaseReport{Phase: p.Title(), Status: "skipped", Detail: why})
				continue
			}
		}
		obs.PhaseStarted(p.Title())
		start := time.Now()
		err := p.Run(ctx)
		took := time.Since(start)
		obs.PhaseFinished(p.Title(), err, took)
		r := PhaseReport{Phase: p.Title(), Status: "ok", Took: took.Round(time.Millisecond).String()}
		if err != nil {
			r.Status, r.Detail = "failed", err.Error()
			failedTitle, runErr = p.Title(), err
		} else {
			done = append(done, p)
		}
		m.report = append(m.report, r)
	}

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var cleanups []CleanupReport
	if runErr != nil {
		for i := len(done) - 1; i >= 0; i-- {
			c, ok := done[i].(Cleaner)
			if !ok {
				continue
			}
			did, err := c.Cleanup(cctx)
			obs.CleanupFinished(done[i].Title(), did, err)
			if did == "" && err == nil {
				continue
			}
			r := CleanupReport{Phase: done[i].Title(), Did: did}
			if err != nil {
				r.Error = err.Error()
			}
			cleanups = append(cleanups, r)
		}
	}
	var ferrs []error
	for i := len(done) - 1; i >= 0; i-- {
		if f, ok := done[i].(Finalizer); ok {
			if err := f.Finalize(cctx); err != nil {
				ferrs = append(ferrs, err)
			}
		}
	}
	if runErr != nil {
		return &Error{Phase: failedTitle, Err: runErr, Cleanups: cleanups, Finalize: errors.Join(ferrs...)}
	}
	return errors.Join(ferrs...)
}

// Func adapts closures to the phase interfaces, for pipelines whose phases share one state.
// Only Do is required.
type Func struct {
	Name    string
	Do      func(ctx context.Context) error
	Undo    func(ctx context.Context) (string, error)
	Finally func(ctx context.Context) error
	SkipIf  func() (bool, string)
}

func (p *Func) Title() string                 { return p.Name }
func (p *Func) Run(ctx context.Context) error { return p.Do(ctx) }

// Cleanup implements Cleaner.
func (p *Func) Cleanup(ctx context.Context) (string, error) {
	if p.Undo == nil {
		return "", nil
	}
	return p.Undo(ctx)
}

// Finalize implements Finalizer.
func (p *Func) Finalize(ctx context.Context) error {
	if p.Finally == nil {
		return nil
	}
	return p.Finally(ctx)
}

// Skip implements Skipper.
func (p *Func) Skip() (bool, string) {
	if p.SkipIf == nil {
		return false, ""
	}
	return p.SkipIf()
}
