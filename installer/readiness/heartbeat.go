package readiness

import (
	"fmt"
	"time"
)

// DefaultEvery is the longest a wait stays silent: a user watching an install, an upgrade, an
// adopt or a restore sees what it waits for at least this often.
const DefaultEvery = 10 * time.Second

// Heartbeat decides when a wait says what it waits for: when that changes, and at least every
// Every (DefaultEvery when zero) while it does not.
type Heartbeat struct {
	Every time.Duration
	last  time.Time
	said  string
}

// Due reports whether what should be said now, and if so notes that it was.
func (h *Heartbeat) Due(what string) bool {
	every := h.Every
	if every <= 0 {
		every = DefaultEvery
	}
	if what == h.said && time.Since(h.last) < every {
		return false
	}
	h.said, h.last = what, time.Now()
	return true
}

// Sayer says a wait's state through say ("<prefix> (12s of 5m0s): <what>") when its Heartbeat
// is due; say may be nil (silent).
type Sayer struct {
	Beat    Heartbeat
	Prefix  string
	Timeout time.Duration
	start   time.Time
	say     func(string)
}

// NewSayer starts the clock of a wait of at most timeout.
func NewSayer(say func(string), prefix string, timeout time.Duration) *Sayer {
	return &Sayer{Prefix: prefix, Timeout: timeout, start: time.Now(), say: say}
}

// Tick says what when it is due.
func (s *Sayer) Tick(what string) {
	if s == nil || s.say == nil || !s.Beat.Due(what) {
		return
	}
	s.say(fmt.Sprintf("%s (%s of %s): %s", s.Prefix, time.Since(s.start).Round(time.Second), s.Timeout, what))
}
