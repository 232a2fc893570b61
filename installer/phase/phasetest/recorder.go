// Package phasetest holds helpers for tests of phase pipelines.
package phasetest

import (
	"sync"
	"time"
)

// Recorder is a phase.Observer that keeps the events in order ("start X", "skip X", "fail X",
// "cleanup X"); fakes add their own with Add, so a test sees the whole sequence at once.
type Recorder struct {
	mu     sync.Mutex
	events []string
}

// Add records an event.
func (r *Recorder) Add(e string) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }

// Events returns the events so far.
func (r *Recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *Recorder) PhaseStarted(t string)    { r.Add("start " + t) }
func (r *Recorder) PhaseSkipped(t, _ string) { r.Add("skip " + t) }
func (r *Recorder) PhaseFinished(t string, err error, _ time.Duration) {
	if err != nil {
		r.Add("fail " + t)
	}
}
func (r *Recorder) CleanupFinished(t, did string, err error) { r.Add("cleanup " + t) }
