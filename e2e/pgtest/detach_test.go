package pgtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDetachOutlivesTheProcess: a detached server keeps running after the process that
// started it has exited (as the demo's database outlives `make demo`), a later process
// attaches to it with the saved State and its data, and Close stops it and removes its files.
func TestDetachOutlivesTheProcess(t *testing.T) {
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startDetachedInChild(t)
	s, err := Attach(ctx, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	out, err := s.Psql(ctx, st.Database, "SELECT count(*) FROM runs")
	require.NoError(t, err, "the server started by the exited process still serves")
	assert.Equal(t, "20", out)

	// Stopped behind our back (a reboot): Attach starts it again, data kept.
	require.NoError(t, s.Stop(ctx, "fast"))
	s, err = Attach(ctx, st)
	require.NoError(t, err)
	out, err = s.Psql(ctx, st.Database, "SELECT count(*) FROM runs")
	require.NoError(t, err)
	assert.Equal(t, "20", out)

	require.NoError(t, s.Close())
	_, err = os.Stat(st.Dir)
	assert.True(t, os.IsNotExist(err), "Close removed %s", st.Dir)
	_, err = Attach(ctx, st)
	assert.ErrorContains(t, err, "no PostgreSQL data directory")
}

// detachChildEnv makes the test binary act as the process that starts a server and exits.
const detachChildEnv = "PGTEST_DETACH_CHILD_STATE"

func TestMain(m *testing.M) {
	if path := os.Getenv(detachChildEnv); path != "" {
		if err := detachChild(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startDetachedInChild runs a separate process that starts a server, seeds it, detaches and
// exits, and returns the State it wrote.
func startDetachedInChild(t *testing.T) State {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), detachChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var st State
	require.NoError(t, json.Unmarshal(b, &st))
	return st
}

func detachChild(path string) error {
	ctx := context.Background()
	s, err := Start(ctx, WithFastUnsafe())
	if err != nil {
		return err
	}
	if err := Seed(ctx, s, s.Database, SeedSpec{Runs: 20}); err != nil {
		_ = s.Close()
		return err
	}
	b, err := json.Marshal(s.Detach())
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
