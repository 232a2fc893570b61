package redact

import (
	"io"
	"sort"
	"strings"
	"sync"
)

// MinLength is the shortest secret a Scrubber masks in free text: shorter strings would mask
// ordinary words and numbers everywhere. Values found by path are masked whatever their length.
const MinLength = 4

// Scrubber masks known secret strings in free text. It learns them as a run goes (inputs,
// then rendered Secrets) and is safe for concurrent use.
type Scrubber struct {
	mu      sync.RWMutex
	secrets map[string]bool
	ordered []string // longest first, so a secret containing another is masked whole
}

// NewScrubber returns a Scrubber that knows no secret yet.
func NewScrubber() *Scrubber { return &Scrubber{secrets: map[string]bool{}} }

// Add teaches the Scrubber secret values. A value with several lines (a key file) is also
// learnt line by line, since it is often printed in parts.
func (s *Scrubber) Add(values ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) < MinLength || s.secrets[v] {
			return
		}
		s.secrets[v] = true
		changed = true
	}
	for _, v := range values {
		add(v)
		if strings.Contains(v, "\n") {
			for _, l := range strings.Split(v, "\n") {
				add(l)
			}
		}
	}
	if changed {
		s.ordered = s.ordered[:0]
		for v := range s.secrets {
			s.ordered = append(s.ordered, v)
		}
		sort.Slice(s.ordered, func(i, j int) bool {
			if len(s.ordered[i]) != len(s.ordered[j]) {
				return len(s.ordered[i]) > len(s.ordered[j])
			}
			return s.ordered[i] < s.ordered[j]
		})
	}
}

// String masks every known secret in text.
func (s *Scrubber) String(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.ordered {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Mask)
		}
	}
	return text
}

// Writer masks known secrets in each write to w. Each write is masked on its own: callers
// write whole lines or documents (progress lines, results, log lines).
func (s *Scrubber) Writer(w io.Writer) io.Writer { return &writer{s: s, w: w} }

type writer struct {
	s *Scrubber
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	masked := w.s.String(string(p))
	if _, err := io.WriteString(w.w, masked); err != nil {
		return 0, err
	}
	return len(p), nil
}
