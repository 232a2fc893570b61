package local

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An exec probe's timeout counts the probe's CPU time: a probe that waits longer than its
// timeout without using the CPU (as the agent's healthz does while the scenarios beside it
// hold the cores) passes, one that computes past it fails, and one that hangs is ended.
func TestExecProbeTimeoutIsCPUTime(t *testing.T) {
	proc := &HostProcess{Env: os.Environ(), Dir: t.TempDir()}
	ctx := context.Background()

	require.NoError(t, runExecProbe(ctx, []string{"sleep", "1.5"}, proc, time.Second),
		"a probe that takes longer than its timeout but no CPU passes")

	start := time.Now()
	err := runExecProbe(ctx, []string{"bash", "-c", "while :; do :; done"}, proc, time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CPU-seconds, more than its timeout of 1s")
	assert.Less(t, time.Since(start), execProbeWallFactor*time.Second, "ended once over its CPU time")

	err = runExecProbe(ctx, []string{"bash", "-c", "echo not healthy; exit 3"}, proc, time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 3: not healthy")

	start = time.Now()
	require.Error(t, runExecProbe(ctx, []string{"sleep", "60"}, proc, 200*time.Millisecond), "a probe that hangs fails")
	assert.Less(t, time.Since(start), 5*time.Second, "after execProbeWallFactor times its timeout")
}
