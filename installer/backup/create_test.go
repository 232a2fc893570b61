package backup

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
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

// writesDuringDump is a target on which rows are inserted and committed while pg_dump runs
// (after it started, before the backup's row counts could be taken afterwards).
type writesDuringDump struct {
	*LocalTarget
	s  *pgtest.Server
	db string
}

func (w writesDuringDump) Run(ctx context.Context, tool string, args []string, stdio Stdio) error {
	err := w.LocalTarget.Run(ctx, tool, args, stdio)
	if tool == "pg_dump" && err == nil {
		if _, ierr := w.s.Psql(ctx, w.db,
			"INSERT INTO runs SELECT id + 10000000 + g, gen_random_uuid(), project_id, owner_id, name, status, spec, outputs, created_at, updated_at FROM runs, generate_series(1, 25) g WHERE id = (SELECT min(id) FROM runs)"); ierr != nil {
			return ierr
		}
	}
	return err
}

// The row counts a backup records (and a restore is compared against) are those of the dump,
// even when the platform writes while it is taken: counted after the dump instead, they would
// include rows the dump lacks and a good restore would show fewer rows than the backup.
func TestRowCountsDescribeTheDump(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	const src, dst = "writes_src", "writes_dst"
	require.NoError(t, s.CreateDatabase(ctx, src))
	require.NoError(t, pgtest.Seed(ctx, s, src, pgtest.SeedSpec{Runs: 200}))
	require.NoError(t, s.CreateDatabase(ctx, dst))

	m, err := Create(ctx, writesDuringDump{localTarget(s, src, s.BinDir), s, src}, WithOutputDir(t.TempDir()))
	require.NoError(t, err)
	rep, err := Restore(ctx, localTarget(s, dst, s.BinDir), m.Dir, WithToolsDir(s.BinDir))
	require.NoError(t, err)
	now, err := CountRows(ctx, localTarget(s, src, s.BinDir))
	require.NoError(t, err)
	require.Equal(t, rep.Rows["public.runs"]+25, now["public.runs"], "the writer's rows were committed after the dump began")
	assert.Equal(t, m.Rows, rep.Rows, "rows restored from the dump against the rows the backup recorded")
}

// heldOutput is a target whose transport hands a session's output over only when it ends, as
// some exec proxies do.
type heldOutput struct{ *LocalTarget }

func (h heldOutput) Run(ctx context.Context, tool string, args []string, stdio Stdio) error {
	if stdio.Stdin == nil {
		return h.LocalTarget.Run(ctx, tool, args, stdio)
	}
	var held bytes.Buffer
	err := h.LocalTarget.Run(ctx, tool, args, Stdio{Stdin: stdio.Stdin, Stdout: &held, Stderr: stdio.Stderr})
	_, _ = io.Copy(stdio.Stdout, &held)
	return err
}

// Such a transport costs the backup its counting in the dump's snapshot, not the backup: the
// rows are counted after the dump instead, and the backup finishes.
func TestCreateWithoutSnapshotSession(t *testing.T) {
	s, want := sharedServer(t)
	snapshotTimeout = time.Second
	t.Cleanup(func() { snapshotTimeout = 30 * time.Second })
	var logs bytes.Buffer
	m, err := Create(context.Background(), heldOutput{localTarget(s, s.Database, s.BinDir)}, WithOutputDir(t.TempDir()), WithLogger(testLogger(&logs)))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "row counts will be taken after the dump")
	assert.Len(t, m.Rows, len(want))
}
