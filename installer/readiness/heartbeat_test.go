package readiness_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

// TestHeartbeatSaysChangesAndNeverGoesSilent: a wait says what it waits for when that changes,
// and again once Every has passed while it does not.
func TestHeartbeatSaysChangesAndNeverGoesSilent(t *testing.T) {
	var said []string
	s := readiness.NewSayer(func(l string) { said = append(said, l) }, "waiting for the database writers' pods to stop", time.Minute)
	s.Beat.Every = 50 * time.Millisecond
	s.Tick("2 still running: a, b")
	s.Tick("2 still running: a, b") // unchanged, too soon
	s.Tick("1 still running: b")    // changed
	time.Sleep(60 * time.Millisecond)
	s.Tick("1 still running: b") // unchanged, but Every has passed
	assert.Len(t, said, 3, "%q", said)
	assert.Regexp(t, `^waiting for the database writers' pods to stop \(0s of 1m0s\): 2 still running: a, b$`, said[0])
	assert.Contains(t, said[2], "1 still running: b")

	var h readiness.Heartbeat
	assert.True(t, h.Due("x"))
	assert.False(t, h.Due("x"), "the default Every is %s", readiness.DefaultEvery)
	readiness.NewSayer(nil, "silent", time.Minute).Tick("nobody listens") // no panic
}
