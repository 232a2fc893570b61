package output

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// Marks used in human output (linkerd check style).
const (
	MarkOK   = "√"
	MarkWarn = "‼"
	MarkFail = "×"
	MarkSkip = "-"
	MarkStep = "•"
)

// Progress prints human progress lines on stderr. Safe for concurrent use.
type Progress struct {
	mu sync.Mutex
	w  io.Writer
}

// NewProgress returns a progress printer writing to w (stderr).
func NewProgress(w io.Writer) *Progress { return &Progress{w: w} }

func (p *Progress) line(mark, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	fmt.Fprintf(p.w, "%s %s\n", mark, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(p.w, "  %s\n", l)
	}
}

// Step announces a phase ("• Installing release polyaxon").
func (p *Progress) Step(msg string) { p.line(MarkStep, msg) }

// OK reports success.
func (p *Progress) OK(msg string) { p.line(MarkOK, msg) }

// Warn reports a warning.
func (p *Progress) Warn(msg string) { p.line(MarkWarn, msg) }

// Fail reports a failure.
func (p *Progress) Fail(msg string) { p.line(MarkFail, msg) }

// Writer is the underlying writer (for free-form text).
func (p *Progress) Writer() io.Writer { return p.w }

// CheckObserver prints check results as they finish, grouped by category:
//
//	cluster
//	-------
//	√ the API server is reachable
//	× RBAC allows creating every object [rbac]
//	    cannot create apps/deployments in polyaxon
//	    see https://...#check-rbac
type CheckObserver struct {
	p        *Progress
	category string
}

// NewCheckObserver prints check results to p.
func NewCheckObserver(p *Progress) *CheckObserver { return &CheckObserver{p: p} }

var _ check.Observer = (*CheckObserver)(nil)

// Started implements check.Observer.
func (o *CheckObserver) Started(check.Check) {}

// Finished implements check.Observer.
func (o *CheckObserver) Finished(r check.Result) {
	o.p.mu.Lock()
	if r.Category != o.category {
		if o.category != "" {
			fmt.Fprintln(o.p.w)
		}
		o.category = r.Category
		fmt.Fprintf(o.p.w, "%s\n%s\n", r.Category, strings.Repeat("-", len(r.Category)))
	}
	o.p.mu.Unlock()

	title := r.Description
	switch r.Status {
	case check.Passed:
		if r.Detail != "" {
			title += ": " + r.Detail
		}
		o.p.OK(title)
	case check.Skipped:
		o.p.line(MarkSkip, title+" (skipped: "+r.Detail+")")
	case check.Warned, check.Failed:
		mark := MarkFail
		if r.Status == check.Warned {
			mark = MarkWarn
		}
		suffix := " [" + r.ID + "]"
		if r.Ignored {
			suffix = " [" + r.ID + ", ignored]"
		}
		msg := title + suffix + "\n  " + strings.ReplaceAll(r.Detail, "\n", "\n  ")
		if r.Hint != "" {
			msg += "\n  fix: " + r.Hint
		}
		if r.Docs != "" {
			msg += "\n  see " + r.Docs
		}
		o.p.line(mark, msg)
	}
}

// PhaseObserver prints a phase pipeline's progress (installer/phase): each phase as it starts
// and ends, and what the cleanups did after a failure.
type PhaseObserver struct{ p *Progress }

// NewPhaseObserver prints phase events to p.
func NewPhaseObserver(p *Progress) PhaseObserver { return PhaseObserver{p: p} }

func (o PhaseObserver) PhaseStarted(title string) { o.p.Step(title) }

func (o PhaseObserver) PhaseSkipped(title, reason string) {
	o.p.Step(fmt.Sprintf("%s: skipped (%s)", title, reason))
}

func (o PhaseObserver) PhaseFinished(title string, err error, took time.Duration) {
	if err != nil {
		o.p.Fail(fmt.Sprintf("%s failed after %s", title, took.Round(time.Millisecond)))
		return
	}
	o.p.OK(fmt.Sprintf("%s (%s)", title, took.Round(time.Millisecond)))
}

func (o PhaseObserver) CleanupFinished(title, did string, err error) {
	switch {
	case err != nil:
		o.p.Fail(fmt.Sprintf("undoing %s failed: %v", title, err))
	case did != "":
		o.p.Warn(did)
	}
}
