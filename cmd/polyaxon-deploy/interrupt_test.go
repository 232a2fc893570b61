package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// A second Ctrl-C exits at once (130), but first runs what the command registered: an
// unfinished backup directory is removed rather than left behind.
func TestSecondInterruptRunsExitCleanups(t *testing.T) {
	var mu sync.Mutex
	var events []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, s)
	}
	partial := filepath.Join(t.TempDir(), "polyaxon-20260101T000000Z")
	require.NoError(t, os.Mkdir(partial, 0o700))

	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	exited := make(chan int, 1)
	app.Metadata[envKey].(*env).exit = func(code int) {
		_, err := os.Stat(partial)
		record("exit, partial directory left: " + map[bool]string{true: "yes", false: "no"}[err == nil])
		exited <- code
	}
	app.Commands = []*cli.Command{{Name: "probe", Action: func(c *cli.Context) error {
		ctx, stop := commandContext(c)
		defer stop()
		unregister := registerExitCleanup(c, func() { record("cleanup"); _ = os.RemoveAll(partial) })
		defer unregister()
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
		<-ctx.Done() // the first Ctrl-C cancels
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
		select {
		case code := <-exited:
			assert.Equal(t, ExitInterrupted, code)
		case <-time.After(10 * time.Second):
			t.Fatal("the second Ctrl-C did not exit")
		}
		return nil
	}}}
	require.NoError(t, app.RunContext(context.Background(), []string{"polyaxon-deploy", "probe"}))
	assert.Equal(t, []string{"cleanup", "exit, partial directory left: no"}, events)
	assert.Contains(t, errb.String(), "press Ctrl-C again to exit now")
}
