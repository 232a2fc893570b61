package backup

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// sharedRuns sizes the shared database: about 10 rows per run (>= 100k rows).
const sharedRuns = 12000

var shared struct {
	once sync.Once
	srv  *pgtest.Server
	sums map[string]string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// sharedServer is a seeded server reused by tests that do not stop it.
func sharedServer(t *testing.T) (*pgtest.Server, map[string]string) {
	t.Helper()
	pgtest.SkipIfShort(t)
	shared.once.Do(func() {
		ctx := context.Background()
		s, err := pgtest.Start(ctx, pgtest.WithFastUnsafe())
		if err != nil {
			shared.err = err
			return
		}
		shared.srv = s
		if err := pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: sharedRuns}); err != nil {
			shared.err = err
			return
		}
		shared.sums, shared.err = pgtest.Checksums(ctx, s, s.Database)
	})
	require.NoError(t, shared.err)
	return shared.srv, shared.sums
}

// toolWrappers makes a directory of pg_dump/pg_restore/psql scripts that
// append their argv to argvLog and exec the real tool, so tests can check
// what reached a command line.
func toolWrappers(t *testing.T, s *pgtest.Server) (dir, argvLog string) {
	t.Helper()
	dir = t.TempDir()
	argvLog = filepath.Join(dir, "argv.log")
	for _, tool := range []string{"pg_dump", "pg_restore", "psql"} {
		script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$0 $*\" >> %s\nexec %s \"$@\"\n", argvLog, s.Bin(tool))
		require.NoError(t, os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755))
	}
	return dir, argvLog
}

func localTarget(s *pgtest.Server, db, binDir string) *LocalTarget {
	return NewLocalTarget(Conn{Host: s.Host, Port: s.Port, User: s.User, Database: db, Password: s.Password()},
		WithLocalBinDir(binDir))
}

// testLogger logs everything into buf.
func testLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&lockedWriter{w: buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// cmdlinesContaining lists processes whose command line contains s.
func cmdlinesContaining(s string) []string {
	var hits []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return hits
}

// localExecer plays a pod exec the way kwok's ClusterExec does: it runs
// the command on this machine with the container's environment.
type localExecer struct {
	env   []string
	calls [][]string
	mu    sync.Mutex
}

type exitErr struct{ code int }

func (e exitErr) Error() string   { return "command terminated with exit code " + strconv.Itoa(e.code) }
func (e exitErr) ExitStatus() int { return e.code }

func (l *localExecer) Exec(ctx context.Context, ns, pod, container string, command []string, stdio Stdio) error {
	l.mu.Lock()
	l.calls = append(l.calls, command)
	l.mu.Unlock()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), l.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return exitErr{ee.ExitCode()}
	}
	return err
}

// copyBackup copies a backup directory's files into a new temp dir.
func copyBackup(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	require.NoError(t, os.Mkdir(dst, 0o700))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
	return dst
}
