package output

import (
	"bytes"
	"encoding/json"
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

// Progress prints human progress lines on stderr, or, for scripts (-o json|yaml), one JSON
// event per line. Safe for concurrent use.
type Progress struct {
	mu     sync.Mutex
	w      io.Writer
	events *json.Encoder // set: every line is an Event
	free   *eventLines   // Writer() in event mode
	now    func() time.Time
}

// Event is one progress line as a script reads it (-o json|yaml, on stderr): the result stays
// alone on stdout.
type Event struct {
	Time time.Time `json:"time"`
	// Kind is step (a phase starts), ok, warning, failure, skipped, or info (anything else the
	// command says while it works: what it waits for, what it did).
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// NewProgress returns a progress printer writing to w (stderr).
func NewProgress(w io.Writer) *Progress { return &Progress{w: w} }

// NewEventProgress returns a progress printer writing one JSON Event per line to w.
func NewEventProgress(w io.Writer) *Progress {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages stay readable: "->", "<namespace>"
	p := &Progress{w: w, events: enc, now: time.Now}
	p.free = &eventLines{p: p}
	return p
}

var eventKinds = map[string]string{MarkStep: "step", MarkOK: "ok", MarkWarn: "warning", MarkFail: "failure", MarkSkip: "skipped"}

// Text is the event as Progress prints it for a person: its kind's mark and its message, the
// message's further lines indented; an info event is its message alone.
func (e Event) Text() string {
	if e.Kind == "info" {
		return e.Message + "\n"
	}
	mark := MarkStep
	for m, k := range eventKinds {
		if k == e.Kind {
			mark = m
		}
	}
	lines := strings.Split(e.Message, "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", mark, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// TextOf renders a stream of events (stderr with -o json|yaml) as the lines a person reads
// without -o; lines that are not events stay as they are.
func TextOf(stream string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(stream, "\n") {
		var e Event
		if json.Unmarshal([]byte(line), &e) != nil || e.Kind == "" {
			b.WriteString(line)
			continue
		}
		b.WriteString(e.Text())
	}
	return b.String()
}

// Events reports whether p writes JSON events rather than lines for a human.
func (p *Progress) Events() bool { return p.events != nil }

// emit writes one event; p.mu is held.
func (p *Progress) emit(kind, msg string) {
	_ = p.events.Encode(Event{Time: p.now().UTC(), Kind: kind, Message: msg})
}

func (p *Progress) line(mark, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := Event{Kind: eventKinds[mark], Message: strings.TrimRight(msg, "\n")}
	if p.events != nil {
		p.emit(e.Kind, e.Message)
		return
	}
	io.WriteString(p.w, e.Text())
}

// Step announces a phase ("• Installing release polyaxon").
func (p *Progress) Step(msg string) { p.line(MarkStep, msg) }

// OK reports success.
func (p *Progress) OK(msg string) { p.line(MarkOK, msg) }

// Warn reports a warning.
func (p *Progress) Warn(msg string) { p.line(MarkWarn, msg) }

// Fail reports a failure.
func (p *Progress) Fail(msg string) { p.line(MarkFail, msg) }

// Writer is where free-form progress text goes: the underlying writer, or in event mode a
// writer that makes each line an info event.
func (p *Progress) Writer() io.Writer {
	if p.free != nil {
		return p.free
	}
	return p.w
}

// eventLines turns written text into info events, a line each (a partial line waits for its end).
type eventLines struct {
	p    *Progress
	part []byte
}

func (e *eventLines) Write(b []byte) (int, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.part = append(e.part, b...)
	for {
		i := bytes.IndexByte(e.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		// Indentation stays: a line may continue the one before it.
		if line := strings.TrimRight(string(e.part[:i]), "\r"); strings.TrimSpace(line) != "" {
			e.p.emit("info", line)
		}
		e.part = e.part[i+1:]
	}
}

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
	if r.Category != o.category && o.p.events == nil {
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
