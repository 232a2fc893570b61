// Package check runs checks described as data: each has a stable ID, a category, a
// description, a severity, a hint with a docs anchor, and a function. A Runner executes them
// in order, reports every failure (not only the first), demotes ignored checks to warnings
// and hands each result to an Observer. The runner never prints.
package check

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Severity says what a failure means.
type Severity string

const (
	// Fatal: the failure makes the remaining checks meaningless; they are skipped.
	Fatal Severity = "fatal"
	// Error: the failure fails the run; the remaining checks still run.
	Error Severity = "error"
	// Warning: reported, never fails the run (except with --strict).
	Warning Severity = "warning"
)

// Status is the outcome of one check.
type Status string

const (
	Passed  Status = "passed"
	Warned  Status = "warning"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// DocsBase prefixes a check's DocsAnchor.
const DocsBase = "https://github.com/polyaxon-deploy/polyaxon-deploy/blob/main/docs/preflight-checks.md#"

// Check is one check, as data.
type Check struct {
	ID          string // stable, kebab-case, used by --ignore
	Category    string // e.g. "cluster", "permissions", "scheduling"
	Description string // what is checked, e.g. "the API server is reachable"
	Severity    Severity
	Hint        string // how to fix a failure
	DocsAnchor  string // anchor in docs/preflight-checks.md, e.g. "check-kube-version"
	// Run returns a one-line detail on success (may be ""), or an error. Wrap with Warn to
	// report a non-fatal concern, Skip when the check does not apply.
	Run func(ctx context.Context) (string, error)
}

// Docs is the documentation URL of the check.
func (c Check) Docs() string {
	if c.DocsAnchor == "" {
		return ""
	}
	return DocsBase + c.DocsAnchor
}

// Result is the outcome of one check, ready for printing or JSON.
type Result struct {
	ID          string        `json:"id"`
	Category    string        `json:"category"`
	Description string        `json:"description"`
	Severity    Severity      `json:"severity"`
	Status      Status        `json:"status"`
	Detail      string        `json:"detail,omitempty"`
	Hint        string        `json:"hint,omitempty"`
	Docs        string        `json:"docs,omitempty"`
	Ignored     bool          `json:"ignored,omitempty"`
	Duration    time.Duration `json:"-"`
}

// Report is the outcome of a run.
type Report struct {
	Results []Result `json:"results"`
}

// Failed reports whether any check failed (ignored ones are warnings, not failures).
func (r Report) Failed() bool { return r.count(Failed) > 0 }

// Warned reports whether any check ended as a warning.
func (r Report) Warned() bool { return r.count(Warned) > 0 }

// Failures returns the failed results.
func (r Report) Failures() []Result { return r.filter(Failed) }

// Warnings returns the results that ended as warnings.
func (r Report) Warnings() []Result { return r.filter(Warned) }

// Summary counts results by status ("3 passed, 1 warning, 1 failed").
func (r Report) Summary() string {
	var parts []string
	for _, s := range []Status{Passed, Warned, Failed, Skipped} {
		if n := r.count(s); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return "no checks"
	}
	return strings.Join(parts, ", ")
}

func (r Report) count(s Status) int { return len(r.filter(s)) }

func (r Report) filter(s Status) []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Status == s {
			out = append(out, x)
		}
	}
	return out
}

// Observer receives results as they happen (progress on a terminal, or collection for JSON).
type Observer interface {
	Started(c Check)
	Finished(r Result)
}

// ObserverFuncs adapts functions to Observer; nil fields are no-ops.
type ObserverFuncs struct {
	OnStart  func(Check)
	OnFinish func(Result)
}

func (o ObserverFuncs) Started(c Check) {
	if o.OnStart != nil {
		o.OnStart(c)
	}
}

func (o ObserverFuncs) Finished(r Result) {
	if o.OnFinish != nil {
		o.OnFinish(r)
	}
}

// warnError marks a check outcome as a warning whatever the severity.
type warnError struct{ err error }

func (w *warnError) Error() string { return w.err.Error() }
func (w *warnError) Unwrap() error { return w.err }

// Warn reports a concern that must not fail the run (a guess, or something the user may
// know better), e.g. "no default IngressClass; the controller may still pick it up".
func Warn(err error) error {
	if err == nil {
		return nil
	}
	return &warnError{err}
}

// Warnf is Warn(fmt.Errorf(...)).
func Warnf(format string, a ...any) error { return Warn(fmt.Errorf(format, a...)) }

type skipError struct{ reason string }

func (s *skipError) Error() string { return s.reason }

// Skip ends a check as skipped (it does not apply), with the reason as detail.
func Skip(reason string) error { return &skipError{reason} }

// Runner runs checks in order.
type Runner struct {
	checks   []Check
	ignore   map[string]bool
	fatal    map[string]bool
	observer Observer
	timeout  time.Duration
	now      func() time.Time
}

// Option configures a Runner.
type Option func(*Runner)

// WithIgnore demotes failures of these check IDs to warnings (kubeadm's
// --ignore-preflight-errors). "all" ignores every check.
func WithIgnore(ids ...string) Option {
	return func(r *Runner) {
		for _, id := range ids {
			r.ignore[strings.TrimSpace(id)] = true
		}
	}
}

// WithFatal promotes these check IDs to fatal (a profile's policy.fatalChecks).
func WithFatal(ids ...string) Option {
	return func(r *Runner) {
		for _, id := range ids {
			r.fatal[id] = true
		}
	}
}

// WithObserver sets the observer.
func WithObserver(o Observer) Option { return func(r *Runner) { r.observer = o } }

// WithCheckTimeout bounds each check (default 2m: a dry-run of every object or a snapshot of a
// large cluster takes a while).
func WithCheckTimeout(d time.Duration) Option { return func(r *Runner) { r.timeout = d } }

// NewRunner returns a runner over checks.
func NewRunner(checks []Check, opts ...Option) *Runner {
	r := &Runner{
		checks:   checks,
		ignore:   map[string]bool{},
		fatal:    map[string]bool{},
		observer: ObserverFuncs{},
		timeout:  2 * time.Minute,
		now:      time.Now,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Validate reports --ignore IDs that match no check (a typo would silently ignore nothing).
func (r *Runner) Validate() error {
	known := map[string]bool{"all": true}
	for _, c := range r.checks {
		known[c.ID] = true
	}
	var unknown []string
	for id := range r.ignore {
		if !known[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	var ids []string
	for _, c := range r.checks {
		ids = append(ids, c.ID)
	}
	return fmt.Errorf("unknown check ID(s) %s; known: %s", strings.Join(unknown, ", "), strings.Join(ids, ", "))
}

// Run executes every check in order. A failed fatal check skips the rest (they are still
// reported, as skipped). Cancelling ctx skips what has not run yet.
func (r *Runner) Run(ctx context.Context) Report {
	var rep Report
	var stopped string
	for _, c := range r.checks {
		sev := c.Severity
		if sev == "" {
			sev = Error
		}
		if r.fatal[c.ID] {
			sev = Fatal
		}
		res := Result{ID: c.ID, Category: c.Category, Description: c.Description, Severity: sev, Docs: c.Docs()}
		switch {
		case stopped != "":
			res.Status, res.Detail = Skipped, "not run: "+stopped
			r.observer.Finished(res)
			rep.Results = append(rep.Results, res)
			continue
		case ctx.Err() != nil:
			res.Status, res.Detail = Skipped, "not run: "+ctx.Err().Error()
			r.observer.Finished(res)
			rep.Results = append(rep.Results, res)
			continue
		}
		r.observer.Started(c)
		start := r.now()
		detail, err := r.runOne(ctx, c)
		res.Duration = r.now().Sub(start)
		res.Detail = detail
		var w *warnError
		var s *skipError
		switch {
		case err == nil:
			res.Status = Passed
		case errors.As(err, &s):
			res.Status, res.Detail = Skipped, s.reason
		case errors.As(err, &w) || sev == Warning:
			res.Status, res.Detail, res.Hint = Warned, err.Error(), c.Hint
		case (r.ignore[c.ID] || r.ignore["all"]) && !r.fatal[c.ID]:
			res.Status, res.Detail, res.Hint, res.Ignored = Warned, err.Error(), c.Hint, true
		default:
			res.Status, res.Detail, res.Hint = Failed, err.Error(), c.Hint
			// Only a check fatal by itself (kube-api: nothing else can run) stops the others.
			// A check the profile makes fatal cannot be --ignore'd, but every other failure
			// is still reported beside it.
			if c.Severity == Fatal {
				stopped = c.ID + " failed"
			}
		}
		r.observer.Finished(res)
		rep.Results = append(rep.Results, res)
	}
	return rep
}

// runOne runs a check with a timeout and turns a panic into a failure, so one broken check
// cannot hide the others.
func (r *Runner) runOne(ctx context.Context, c Check) (detail string, err error) {
	if c.Run == nil {
		return "", fmt.Errorf("check %s has no function", c.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check %s panicked: %v", c.ID, p)
		}
	}()
	return c.Run(ctx)
}
