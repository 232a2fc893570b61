package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

func fakeSecrets(context.Context) ([]byte, []string, error) {
	return []byte(`{"apiVersion":"v1","kind":"List","items":[]}` + "\n"), []string{"polyaxon-platform"}, nil
}

// TestRoundTrip: backup -> verify -> restore into a fresh database gives
// identical per-table checksums; the password reaches no command line and
// no log; the manifest says what happened.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, want := sharedServer(t)
	bin, argvLog := toolWrappers(t, s)
	out := t.TempDir()
	var logs bytes.Buffer
	logger := testLogger(&logs)

	var sampled atomic.Bool
	var leaks []string
	var leakMu sync.Mutex
	before := time.Now().UTC().Truncate(time.Second)
	m, err := Create(ctx, localTarget(s, s.Database, bin),
		WithOutputDir(out),
		WithRelease(ReleaseInfo{Name: "polyaxon", Namespace: "ns1", Revision: 3, ChartVersion: "2.15.1", AppVersion: "2.15.1"}),
		WithSecrets(fakeSecrets),
		WithLogger(logger),
		WithProgress(func(n int64) {
			// Mid-dump, look at every process's command line.
			if n > 1<<20 && sampled.CompareAndSwap(false, true) {
				leakMu.Lock()
				leaks = cmdlinesContaining(s.Password())
				leakMu.Unlock()
			}
		}))
	require.NoError(t, err)
	require.True(t, sampled.Load(), "dump too small to sample processes mid-way")
	assert.Empty(t, leaks, "password visible in a process command line")

	// Layout and modes.
	assert.Equal(t, out, filepath.Dir(m.Dir))
	assert.True(t, strings.HasPrefix(filepath.Base(m.Dir), "polyaxon-"), m.Dir)
	_, err = time.Parse(TimestampLayout, strings.TrimPrefix(filepath.Base(m.Dir), "polyaxon-"))
	require.NoError(t, err, "directory name carries a UTC timestamp")
	mode := func(name string) os.FileMode {
		st, err := os.Stat(filepath.Join(m.Dir, name))
		require.NoError(t, err)
		return st.Mode().Perm()
	}
	assert.Equal(t, os.FileMode(0o700), mode(""))
	assert.Equal(t, os.FileMode(0o600), mode(SecretsFile))
	assert.Equal(t, os.FileMode(0o600), mode(ManifestFile))
	assert.Equal(t, os.FileMode(0o600), mode(m.DumpFile))
	files, _ := filepath.Glob(filepath.Join(m.Dir, "*"))
	assert.Len(t, files, 3, "dump, manifest, secrets and nothing else: %v", files)

	// Manifest fields, as written on disk.
	onDisk, err := ReadManifest(m.Dir)
	require.NoError(t, err)
	assert.Equal(t, m, onDisk)
	assert.Equal(t, "polyaxon", m.Release)
	assert.Equal(t, "ns1", m.Namespace)
	assert.Equal(t, 3, m.Revision)
	assert.Equal(t, "2.15.1", m.ChartVersion)
	assert.Equal(t, "2.15.1", m.AppVersion)
	assert.Equal(t, SourceLocal, m.Source)
	assert.Equal(t, s.Database, m.Database)
	assert.NotContains(t, m.Origin, s.Password())
	assert.Regexp(t, `^\d+\.\d+`, m.ServerVersion)
	assert.GreaterOrEqual(t, m.ServerVersionNum, 100000)
	assert.Greater(t, m.DatabaseSize, int64(1<<20))
	assert.Equal(t, "custom", m.DumpFormat)
	assert.Equal(t, FormatVersion, m.FormatVersion, "a database under 64 MiB: one archive, as older polyaxon-deploy read")
	assert.Empty(t, m.Streams)
	assert.Equal(t, "one archive", m.Layout())
	assert.Equal(t, "0", m.DumpCompression)
	assert.Equal(t, Compression{Codec: CodecS2, Level: DefaultLevel}, m.Compression)
	assert.Equal(t, "database.dump.s2", m.DumpFile)
	st, err := os.Stat(filepath.Join(m.Dir, m.DumpFile))
	require.NoError(t, err)
	assert.Equal(t, st.Size(), m.DumpSize)
	assert.Greater(t, m.RawSize, m.DumpSize, "s2 compressed the dump")
	assert.Len(t, m.SHA256, 64)
	assert.True(t, m.Secrets)
	assert.Equal(t, []string{"polyaxon-platform"}, m.SecretNames)
	assert.False(t, m.StartedAt.Before(before))
	assert.False(t, m.FinishedAt.Before(m.StartedAt))
	assert.Equal(t, time.UTC, m.StartedAt.Location())
	raw, err := os.ReadFile(filepath.Join(m.Dir, ManifestFile))
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	for _, k := range []string{"release", "revision", "chartVersion", "appVersion", "serverVersion", "databaseSize",
		"dumpSize", "sha256", "compression", "startedAt", "finishedAt", "dumpFormat"} {
		assert.Contains(t, fields, k)
	}

	// Verify, with a full read of the data blocks.
	rep, err := Verify(ctx, m.Dir, WithToolsDir(bin), WithFullCheck(), WithLogger(logger))
	require.NoError(t, err)
	assert.True(t, rep.Full)
	for _, tbl := range pgtest.Tables {
		assert.Contains(t, rep.Tables, "public."+tbl)
	}
	assert.Equal(t, len(pgtest.Tables), rep.TableData)
	assert.NotEmpty(t, rep.DumpedBy)

	// Restore into a fresh database: identical contents.
	require.NoError(t, s.CreateDatabase(ctx, "restored"))
	target := localTarget(s, "restored", bin)
	rr, err := Restore(ctx, target, m.Dir, WithToolsDir(bin), WithLogger(logger), WithRunningAppVersion("2.15.1"))
	require.NoError(t, err)
	assert.Len(t, rr.Tables, len(pgtest.Tables))
	got, err := pgtest.Checksums(ctx, s, "restored")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Restore over a changed database in one transaction (--clean): identical again.
	_, err = s.Psql(ctx, "restored", `DELETE FROM metrics WHERE id % 7 = 0; UPDATE runs SET status = 'x' WHERE id < 100; DROP TABLE artifacts;`)
	require.NoError(t, err)
	_, err = Restore(ctx, target, m.Dir, WithToolsDir(bin), WithLogger(logger), WithJobs(1))
	require.NoError(t, err)
	got, err = pgtest.Checksums(ctx, s, "restored")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Nothing secret in argv (every tool call recorded) or in the logs.
	argv, err := os.ReadFile(argvLog)
	require.NoError(t, err)
	assert.Contains(t, string(argv), "pg_dump --format=custom --no-password --compress=0")
	assert.Contains(t, string(argv), "pg_restore --list")
	assert.Contains(t, string(argv), "pg_restore --exit-on-error --no-owner --no-password --jobs=")
	assert.Contains(t, string(argv), "pg_restore --clean --if-exists --single-transaction")
	assert.NotContains(t, string(argv), s.Password())
	assert.Contains(t, logs.String(), "backup written")
	assert.NotContains(t, logs.String(), s.Password())
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NotContains(t, string(b), s.Password(), f)
	}
}

// TestVerifyRejectsDamage: truncation and a single flipped byte are caught,
// also when the manifest was made to agree with the damaged file.
func TestVerifyRejectsDamage(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, "damage"))
	require.NoError(t, pgtest.Seed(ctx, s, "damage", pgtest.SeedSpec{Runs: 1500}))
	m, err := Create(ctx, localTarget(s, "damage", s.BinDir), WithOutputDir(t.TempDir()))
	require.NoError(t, err)
	_, err = Verify(ctx, m.Dir, WithToolsDir(s.BinDir))
	require.NoError(t, err)
	dumpOf := func(dir string) string { return filepath.Join(dir, m.DumpFile) }

	t.Run("truncated", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Truncate(dumpOf(dir), m.DumpSize/2))
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrTruncated)
		assert.Contains(t, err.Error(), "truncated")
		assert.Contains(t, err.Error(), "take a new one")
	})
	t.Run("flipped byte", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		flipByte(t, dumpOf(dir), m.DumpSize/2)
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), "sha256")
		assert.Contains(t, err.Error(), "altered or damaged")
	})
	t.Run("flipped byte with a matching manifest", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		flipByte(t, dumpOf(dir), m.DumpSize/2)
		rewriteManifest(t, dir)
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrUnreadable)
	})
	t.Run("truncated with a matching manifest", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Truncate(dumpOf(dir), m.DumpSize-1000))
		rewriteManifest(t, dir)
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrUnreadable)
	})
	t.Run("no manifest", func(t *testing.T) {
		dir := copyBackup(t, m.Dir)
		require.NoError(t, os.Remove(filepath.Join(dir, ManifestFile)))
		_, err := Verify(ctx, dir, WithToolsDir(s.BinDir))
		require.ErrorIs(t, err, ErrIncomplete)
		assert.Contains(t, err.Error(), "did not finish")
	})
	t.Run("restore refuses a damaged backup", func(t *testing.T) {
		// The dump is read once: damage the table of contents does not show is found at the
		// end of the stream, before pg_restore's transaction can commit.
		before, err := pgtest.Checksums(ctx, s, "damage")
		require.NoError(t, err)
		for _, off := range []int64{100, m.DumpSize / 2, m.DumpSize - 10} {
			dir := copyBackup(t, m.Dir)
			flipByte(t, dumpOf(dir), off)
			sc := &fakeScaler{}
			_, err := Restore(ctx, localTarget(s, "damage", s.BinDir), dir, WithToolsDir(s.BinDir), WithScaler(sc))
			require.ErrorIs(t, err, ErrChecksum, "byte %d", off)
			assert.Regexp(t, "nothing was (committed|changed)", err.Error(), "found before anything changed, or before the commit")
			assert.Equal(t, sc.downs, sc.ups, "whatever was scaled down is scaled back")
			got, err := pgtest.Checksums(ctx, s, "damage")
			require.NoError(t, err)
			assert.Equal(t, before, got, "byte %d: the database is unchanged", off)
		}
	})
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// rewriteManifest makes the manifest agree with a damaged dump, so only
// the content checks (zstd, pg_restore) can catch it.
func rewriteManifest(t *testing.T, dir string) {
	t.Helper()
	m, err := ReadManifest(dir)
	require.NoError(t, err)
	_, sum, _, _ := streamToTool(context.Background(), filepath.Join(dir, m.DumpFile), CodecNone, localRunner("true"), nil, false)
	st, err := os.Stat(filepath.Join(dir, m.DumpFile))
	require.NoError(t, err)
	m.SHA256, m.DumpSize = sum, st.Size()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600))
}

// TestDumpFailsMidway: the server stops while pg_dump streams; Create
// fails and leaves nothing that could pass for a backup.
func TestDumpFailsMidway(t *testing.T) {
	ctx := context.Background()
	s := pgtest.New(t, pgtest.WithFastUnsafe())
	require.NoError(t, pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: 4000}))
	out := t.TempDir()
	var stopped atomic.Bool
	var stopErr error
	_, err := Create(ctx, localTarget(s, s.Database, s.BinDir),
		WithOutputDir(out), WithSecrets(fakeSecrets),
		WithProgress(func(n int64) {
			// Blocks the stream (a slow reader) while the server crashes.
			if n > 64<<10 && stopped.CompareAndSwap(false, true) {
				stopErr = s.Stop(ctx, "immediate")
			}
		}))
	require.True(t, stopped.Load())
	require.NoError(t, stopErr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pg_dump failed, no backup was kept")
	assert.NotContains(t, err.Error(), s.Password())

	entries, rerr := os.ReadDir(out)
	require.NoError(t, rerr)
	assert.Empty(t, entries, "a failed dump leaves nothing behind")
	list, lerr := List(out)
	require.NoError(t, lerr)
	assert.Empty(t, list)
	// Nothing anywhere under out verifies.
	_ = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_, verr := Verify(ctx, p, WithToolsDir(s.BinDir))
			assert.Error(t, verr, p)
		}
		return nil
	})
	require.NoError(t, s.Restart(ctx))
}

func TestListNewestFirst(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, "small"))
	require.NoError(t, pgtest.Seed(ctx, s, "small", pgtest.SeedSpec{Runs: 50}))
	out := t.TempDir()
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	var dirs []string
	for _, at := range []time.Time{t0.Add(time.Hour), t0, t0.Add(2 * time.Hour), t0.Add(2 * time.Hour)} {
		at := at
		m, err := Create(ctx, localTarget(s, "small", s.BinDir), WithOutputDir(out),
			WithRelease(ReleaseInfo{Name: "prod-polyaxon", AppVersion: "2.15.1"}), WithClock(func() time.Time { return at }))
		require.NoError(t, err)
		dirs = append(dirs, m.Dir)
	}
	assert.Equal(t, filepath.Join(out, "prod-polyaxon-20250301T120000Z-1"), dirs[3], "same second gets a suffix")
	// An interrupted backup (no manifest) shows up with its problem.
	broken := filepath.Join(out, "prod-polyaxon-20250301T130000Z")
	require.NoError(t, os.Mkdir(broken, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(broken, DumpBaseName+".zst"+partialExt), []byte("x"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(out, "unrelated"), 0o700))

	list, err := List(out)
	require.NoError(t, err)
	require.Len(t, list, 5)
	var good []string
	for _, e := range list {
		if e.Manifest != nil {
			good = append(good, e.Dir)
			assert.Equal(t, "2.15.1", e.Manifest.AppVersion)
		} else {
			assert.Equal(t, broken, e.Dir)
			assert.Contains(t, e.Problem, "did not finish")
		}
	}
	assert.Equal(t, []string{dirs[3], dirs[2], dirs[0], dirs[1]}, good)

	missing, err := List(filepath.Join(out, "nope"))
	require.NoError(t, err)
	assert.Empty(t, missing)
}

// TestPodTarget runs the in-cluster exec path with a stand-in for the API
// server that runs the command here with the container's environment
// (what kwok's ClusterExec does): the password is only in that environment.
func TestPodTarget(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, "podsrc"))
	require.NoError(t, pgtest.Seed(ctx, s, "podsrc", pgtest.SeedSpec{Runs: 300}))
	want, err := pgtest.Checksums(ctx, s, "podsrc")
	require.NoError(t, err)
	bin, argvLog := toolWrappers(t, s)
	containerEnv := func(db string) []string {
		return []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "PGHOST=" + s.Host, "PGPORT=" + strconv.Itoa(s.Port),
			"POSTGRES_USER=" + s.User, "POSTGRES_DB=" + db, "POSTGRES_PASSWORD=" + s.Password(), "PGPASSWORD="}
	}
	ex := &localExecer{env: containerEnv("podsrc")}
	src := NewPodTarget(ex, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)
	m, err := Create(ctx, src, WithOutputDir(t.TempDir()))
	require.NoError(t, err)
	assert.Equal(t, SourceInCluster, m.Source)
	assert.Equal(t, "pod ns1/polyaxon-postgresql-0 container postgresql", m.Origin)
	assert.Equal(t, "podsrc", m.Database)

	require.NoError(t, s.CreateDatabase(ctx, "podrestored"))
	dst := NewPodTarget(&localExecer{env: containerEnv("podrestored")}, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)
	_, err = Restore(ctx, dst, m.Dir, WithToolsDir(bin))
	require.NoError(t, err)
	got, err := pgtest.Checksums(ctx, s, "podrestored")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	for _, c := range ex.calls {
		assert.Equal(t, []string{"sh", "-c"}, c[:2])
		assert.NotContains(t, strings.Join(c, " "), s.Password())
	}
	argv, err := os.ReadFile(argvLog)
	require.NoError(t, err)
	assert.Contains(t, string(argv), "pg_dump -U polyaxon -d podsrc --format=custom")
	assert.NotContains(t, string(argv), s.Password())

	// Local pg_restore missing, or too old for the dump: verify in the pod.
	old := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(old, "pg_restore"),
		[]byte("#!/bin/sh\necho 'pg_restore: error: unsupported version (1.99) in file header' >&2\nexit 1\n"), 0o755))
	for name, toolsDir := range map[string]string{"missing": t.TempDir(), "too old": old} {
		vex := &localExecer{env: containerEnv("podsrc")}
		rep, err := Verify(ctx, m.Dir, WithToolsDir(toolsDir), WithFullCheck(),
			WithVerifyTarget(NewPodTarget(vex, "ns1", "polyaxon-postgresql-0", PostgresContainer, SourceInCluster)))
		require.NoError(t, err, name)
		assert.True(t, rep.Full)
		require.NotEmpty(t, vex.calls, name)
		assert.Equal(t, []string{"pg_restore", "--list"}, vex.calls[0], "read-only pg_restore gets no connection flags")
		assert.Equal(t, []string{"pg_restore", "--file=" + os.DevNull}, vex.calls[len(vex.calls)-1])
	}
	_, err = Verify(ctx, m.Dir, WithToolsDir(old))
	require.ErrorIs(t, err, ErrUnreadable)
	assert.Contains(t, err.Error(), "older than the pg_dump")

	// A failing tool reports its exit code and stderr, without the password.
	bad := NewPodTarget(&localExecer{env: append(containerEnv("podsrc"), "POSTGRES_PASSWORD=wrong")}, "ns1", "p", "postgresql", SourceInCluster)
	_, err = Create(ctx, bad, WithOutputDir(t.TempDir()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "psql exited with code 2 in pod ns1/p")
	assert.Contains(t, err.Error(), "password authentication failed")
}

type fakeScaler struct {
	downs, ups int
	failDown   bool
}

func (f *fakeScaler) ScaleDown(context.Context) (func(context.Context) error, error) {
	f.downs++
	back := func(context.Context) error { f.ups++; return nil }
	if f.failDown {
		return back, errors.New("boom")
	}
	return back, nil
}

func TestRestoreGuardsAndScaling(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, "guard"))
	require.NoError(t, pgtest.Seed(ctx, s, "guard", pgtest.SeedSpec{Runs: 50}))
	m, err := Create(ctx, localTarget(s, "guard", s.BinDir), WithOutputDir(t.TempDir()),
		WithRelease(ReleaseInfo{Name: "polyaxon", AppVersion: "2.16.0"}), WithCompression(CodecNone, 0))
	require.NoError(t, err)
	assert.Equal(t, "default", m.DumpCompression)
	assert.Equal(t, DumpBaseName, m.DumpFile)

	// Newer app version than the running one: refused before scaling.
	sc := &fakeScaler{}
	_, err = Restore(ctx, localTarget(s, "guard", s.BinDir), m.Dir, WithToolsDir(s.BinDir), WithScaler(sc), WithRunningAppVersion("2.15.1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "newer than the running 2.15.1")
	assert.Zero(t, sc.downs)

	// --force: scaled down, restored, scaled back.
	_, err = Restore(ctx, localTarget(s, "guard", s.BinDir), m.Dir, WithToolsDir(s.BinDir), WithScaler(sc),
		WithRunningAppVersion("2.15.1"), WithForce())
	require.NoError(t, err)
	assert.Equal(t, 1, sc.downs)
	assert.Equal(t, 1, sc.ups)

	// A failing restore still scales back; the message says nothing changed.
	wrong := NewLocalTarget(Conn{Host: s.Host, Port: s.Port, User: s.User, Database: "guard", Password: "wrong"}, WithLocalBinDir(s.BinDir))
	_, err = Restore(ctx, wrong, m.Dir, WithToolsDir(s.BinDir), WithScaler(sc))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database is unchanged")
	assert.Equal(t, 2, sc.downs)
	assert.Equal(t, 2, sc.ups)

	// A failing scale-down scales back what it did and stops.
	_, err = Restore(ctx, localTarget(s, "guard", s.BinDir), m.Dir, WithToolsDir(s.BinDir), WithScaler(&fakeScaler{failDown: true}))
	require.ErrorContains(t, err, "scaling down: boom")
}

func TestCheckAppVersion(t *testing.T) {
	require.NoError(t, CheckAppVersion("2.15.1", "2.15.1"))
	require.NoError(t, CheckAppVersion("2.14.0", "2.15.1"))
	require.NoError(t, CheckAppVersion("", "2.15.1"))
	require.Error(t, CheckAppVersion("2.15.2", "2.15.1"))
	require.Error(t, CheckAppVersion("v2.16.0-rc1", "2.15.1"))
	require.ErrorContains(t, CheckAppVersion("banana", "2.15.1"), "--force")
}

func TestOptionsValidation(t *testing.T) {
	_, err := Create(context.Background(), NewLocalTarget(Conn{}), WithCompression("lz4", 1))
	require.ErrorContains(t, err, `unknown compression codec "lz4"`)
	_, err = Create(context.Background(), NewLocalTarget(Conn{}), WithCompression(CodecZstd, 0))
	require.ErrorContains(t, err, "zstd level 0 out of range")
	_, err = Create(context.Background(), NewLocalTarget(Conn{}), WithCompression(CodecS2, 4))
	require.ErrorContains(t, err, "s2 level 4 out of range 1..3")
	c := Conn{Host: "h", Port: 1, User: "u", Database: "d", Password: "sekret"}
	for _, s := range []string{c.String(), c.GoString(), NewLocalTarget(c).String()} {
		assert.NotContains(t, s, "sekret")
	}
}
