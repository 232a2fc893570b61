package backup

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cleanupRegistry plays the CLI's exit path: what a second Ctrl-C runs before exiting.
type cleanupRegistry struct {
	mu       sync.Mutex
	cleanups map[int]func()
	next     int
}

func (r *cleanupRegistry) register(f func()) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cleanups == nil {
		r.cleanups = map[int]func(){}
	}
	id := r.next
	r.next++
	r.cleanups[id] = f
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.cleanups, id)
	}
}

func (r *cleanupRegistry) runAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.cleanups {
		f()
	}
	return len(r.cleanups)
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// Ctrl-C once cancels the dump, twice exits at once: either way no partial backup directory
// is left. The second Ctrl-C cannot wait for Create to unwind, so Create hands its cleanup to
// the caller's registry, which the exit path runs.
func TestCreateCancelledLeavesNothing(t *testing.T) {
	s, _ := sharedServer(t)
	t.Run("cancelled", func(t *testing.T) {
		out := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var once atomic.Bool
		_, err := Create(ctx, localTarget(s, s.Database, s.BinDir), WithOutputDir(out), WithSecrets(fakeSecrets),
			WithProgress(func(n int64) {
				if n > 256<<10 && once.CompareAndSwap(false, true) {
					assert.Len(t, entries(t, out), 1, "the backup directory exists mid-dump")
					cancel()
				}
			}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no backup was kept")
		assert.Empty(t, entries(t, out))
	})
	t.Run("second Ctrl-C exits before Create returns", func(t *testing.T) {
		out := t.TempDir()
		reg := &cleanupRegistry{}
		var left []string
		var ran int
		var once atomic.Bool
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := Create(ctx, localTarget(s, s.Database, s.BinDir), WithOutputDir(out), WithSecrets(fakeSecrets),
			WithCleanupRegistry(reg.register),
			WithProgress(func(n int64) {
				if n > 256<<10 && once.CompareAndSwap(false, true) {
					cancel()               // first Ctrl-C
					ran = reg.runAll()     // second Ctrl-C: the exit path runs the cleanups, then exits
					left = entries(t, out) // what the exit would leave behind
				}
			}))
		require.Error(t, err)
		assert.Equal(t, 1, ran, "Create registered its cleanup")
		assert.Empty(t, left, "nothing left at the moment of exit")
		assert.Empty(t, reg.cleanups, "Create unregistered on return")
	})
	t.Run("panic", func(t *testing.T) {
		out := t.TempDir()
		func() {
			defer func() { assert.NotNil(t, recover()) }()
			_, _ = Create(context.Background(), localTarget(s, s.Database, s.BinDir), WithOutputDir(out),
				WithSecrets(func(context.Context) ([]byte, []string, error) { panic("boom") }))
		}()
		assert.Empty(t, entries(t, out))
	})
}
