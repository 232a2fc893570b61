package phase

import (
	"fmt"
	"io"
	"time"
)

// TextObserver prints phase events as plain lines.
type TextObserver struct{ W io.Writer }

func (o TextObserver) PhaseStarted(title string) { fmt.Fprintf(o.W, "==> %s\n", title) }

func (o TextObserver) PhaseSkipped(title, reason string) {
	fmt.Fprintf(o.W, "--- %s: skipped (%s)\n", title, reason)
}

func (o TextObserver) PhaseFinished(title string, err error, took time.Duration) {
	if err != nil {
		fmt.Fprintf(o.W, "xxx %s failed after %s\n", title, took.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(o.W, "ok  %s (%s)\n", title, took.Round(time.Millisecond))
}

func (o TextObserver) CleanupFinished(title, did string, err error) {
	switch {
	case err != nil:
		fmt.Fprintf(o.W, "xxx undoing %s failed: %v\n", title, err)
	case did != "":
		fmt.Fprintf(o.W, "<== %s: %s\n", title, did)
	}
}
