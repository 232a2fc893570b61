package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"filippo.io/age"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// localBackupCLI seeds a real PostgreSQL with runs runs and gives the CLI, run against it
// (--local) and a fake cluster holding the release, and the tables' checksums.
func localBackupCLI(t *testing.T, runs int) (s *pgtest.Server, want map[string]string, runIt func(args ...string) (int, string, string)) {
	t.Helper()
	ctx := context.Background()
	s = pgtest.New(t, pgtest.WithFastUnsafe())
	require.NoError(t, pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: runs}))
	want, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	require.Len(t, want, len(pgtest.Tables), "a checksum per seeded table")
	lbl := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: "polyaxon", Labels: lbl},
		Data: map[string][]byte{"postgres-password": []byte(s.Password())}})
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	ch.Metadata.Version, ch.Metadata.AppVersion = "2.15.1", "2.15.1"
	require.NoError(t, driver.NewSecrets(cs.CoreV1().Secrets("polyaxon")).Create("sh.helm.release.v1.polyaxon.v1",
		&release.Release{Name: "polyaxon", Namespace: "polyaxon", Version: 1, Chart: ch, Config: map[string]any{}, Info: &release.Info{Status: release.StatusDeployed}}))
	runIt = func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		app := newApp(&out, &errb)

		for _, c := range app.Commands {
			setUsageHandler(c)
		}
		envOf(&cli.Context{App: app}).newSettings = func(c *cli.Context) *kube.Settings {
			return kube.NewSettings("", "", c.String("namespace"), kube.WithClientset(cs), kube.WithRESTConfig(&rest.Config{Host: "x"}))
		}
		err := app.RunContext(ctx, append([]string{"polyaxon-deploy"}, args...))
		return finish(app, err), out.String(), errb.String()
	}
	return s, want, runIt
}

// --streams reaches the dump: the backup is taken in that many streams (one archive with 1),
// `backup list` says so, and the database comes back whole from it.
func TestBackupStreamsFlag(t *testing.T) {
	ctx := context.Background()
	s, want, runIt := localBackupCLI(t, 6000)
	dir := t.TempDir()
	local := []string{"--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir}
	backupWith := func(streams string) (path string, parts int) {
		code, out, errs := runIt(append([]string{"backup", "--streams", streams, "--dir", dir, "-o", "json"}, local...)...)
		require.Equal(t, 0, code, out+errs)
		var res struct {
			Data struct {
				Path    string
				Streams []json.RawMessage
			}
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		return res.Data.Path, len(res.Data.Streams)
	}
	one, parts := backupWith("1")
	assert.Equal(t, 0, parts, "--streams 1 writes one archive")
	streamed, parts := backupWith("2")
	assert.Equal(t, 3, parts, "--streams 2: the schema's archive and two of data")
	code, out, errs := runIt("backup", "list", "--dir", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "3 parallel streams")
	assert.Contains(t, out, "one archive")
	_, err := s.Psql(ctx, s.Database, "DELETE FROM metrics")
	require.NoError(t, err)
	code, out, errs = runIt(append([]string{"restore", streamed, "--yes"}, local...)...)
	require.Equal(t, 0, code, out+errs)
	got, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.DirExists(t, one)
}

// A negative --streams is refused with the fix, before the database or the cluster is read.
func TestBackupRefusesNegativeStreams(t *testing.T) {
	r := runCLI(t, nil, "backup", "--streams", "-1", "--kubeconfig", "/nonexistent")
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--streams -1: give 1 or more streams")
	assert.NotContains(t, r.stderr, "kubeconfig")
}

func TestBackupCLISmoke(t *testing.T) {
	ctx := context.Background()
	s, want, runIt := localBackupCLI(t, 500)
	dir := t.TempDir()
	code, out, errs := runIt("backup", "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir, "--dir", dir, "-o", "json")
	t.Log(out, errs)
	require.Equal(t, 0, code)
	var res struct {
		Data struct {
			Path     string
			DumpFile string
			Verified bool
			Secrets  bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Data.Verified)
	require.True(t, res.Data.Secrets)
	code, out, errs = runIt("backup", "list", "--dir", dir)
	t.Log(out, errs)
	require.Equal(t, 0, code)
	code, out, errs = runIt("backup", "verify", res.Data.Path, "--full")
	t.Log(out, errs)
	require.Equal(t, 0, code)
	_, err := s.Psql(ctx, s.Database, "DELETE FROM metrics")
	require.NoError(t, err)
	emptied, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	require.NotEqual(t, want, emptied, "the restore below has something to put back")
	code, out, errs = runIt("restore", res.Data.Path, "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir)
	t.Log(out, errs)
	require.Equal(t, 2, code)
	code, out, errs = runIt("restore", res.Data.Path, "--yes", "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir)
	t.Log(out, errs)
	require.Equal(t, 0, code)
	got, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	require.Equal(t, want, got)
	// The restore's own output shows each table's rows beside what the backup recorded: the
	// same, metrics (emptied before the restore) included.
	for table, sum := range want {
		n := strings.SplitN(sum, ":", 2)[0]
		require.Regexp(t, `(?m)^public\.`+table+` +`+n+` +`+n+` *$`, out)
	}
	// The database has no clients here, so the restore went into a new database, swapped in.
	require.Regexp(t, `(?m)^way +swap *$`, out)
	// damaged
	require.Equal(t, "database.dump.s2", res.Data.DumpFile, "s2 by default")
	f := filepath.Join(res.Data.Path, res.Data.DumpFile)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	b[len(b)/2] ^= 1
	require.NoError(t, os.WriteFile(f, b, 0o600))
	code, out, errs = runIt("backup", "verify", res.Data.Path)
	t.Log(out, errs)
	require.Equal(t, 1, code)
}

// fakeBackupDir writes a backup directory whose manifest records dump's size and sha256 (no
// PostgreSQL needed: list only reads files).
func fakeBackupDir(t *testing.T, parent, name, release, namespace string, dump []byte) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.DumpBaseName), dump, 0o600))
	sum := sha256.Sum256(dump)
	m := backup.Manifest{FormatVersion: backup.FormatVersion, Release: release, Namespace: namespace, AppVersion: "2.15.1",
		Source: backup.SourceLocal, Database: "polyaxon", DumpFile: backup.DumpBaseName, DumpFormat: "custom",
		Compression: backup.Compression{Codec: backup.CodecNone}, DumpSize: int64(len(dump)), SHA256: hex.EncodeToString(sum[:]),
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.ManifestFile), b, 0o600))
	return dir
}

// backup list reads every dump and checks it against its manifest: a tampered dump is never
// shown as ok; --no-verify says plainly that nothing was checked.
func TestBackupListVerifiesChecksums(t *testing.T) {
	parent := t.TempDir()
	good := fakeBackupDir(t, parent, "polyaxon-20260102T030405Z", "polyaxon", "polyaxon", []byte("PGDMP good dump"))
	bad := fakeBackupDir(t, parent, "polyaxon-20260102T030406Z", "polyaxon", "polyaxon", []byte("PGDMP tampered dump"))
	b, err := os.ReadFile(filepath.Join(bad, backup.DumpBaseName))
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(bad, backup.DumpBaseName), b, 0o600))

	r := runCLI(t, nil, "backup", "list", "--dir", parent)
	require.Equal(t, ExitOK, r.code, r.stderr)
	rows := map[string]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	assert.Contains(t, rows[good], "ok (sha256 verified)")
	assert.NotContains(t, rows[bad], "ok")
	assert.Contains(t, rows[bad], "DAMAGED")

	r = runCLI(t, nil, "backup", "list", "--dir", parent, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var doc struct {
		Status string
		Data   struct {
			Backups []struct {
				Path     string
				Verified bool
				Status   string
				Problem  string
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, "warning", doc.Status)
	require.Len(t, doc.Data.Backups, 2)
	for _, e := range doc.Data.Backups {
		if e.Path == bad {
			assert.False(t, e.Verified)
			assert.Equal(t, "damaged", e.Status)
			assert.Contains(t, e.Problem, "sha256")
		} else {
			assert.True(t, e.Verified)
			assert.Equal(t, "ok", e.Status)
		}
	}

	r = runCLI(t, nil, "backup", "list", "--dir", parent, "--no-verify")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "ok")
	assert.Equal(t, 2, strings.Count(r.stdout, "not verified (--no-verify)"))
	assert.Contains(t, r.stderr, "checksums not verified")
}

// restore refuses a backup of another release or namespace before anything happens, unless
// --force.
func TestRestoreRefusesAnotherReleasesBackup(t *testing.T) {
	parent := t.TempDir()
	other := fakeBackupDir(t, parent, "staging-20260102T030405Z", "staging", "ml-staging", []byte("PGDMP"))
	for _, args := range [][]string{
		{"restore", other, "--yes", "--kubeconfig", "/nonexistent"},
		{"restore", other, "--yes", "--kubeconfig", "/nonexistent", "--release", "staging"},
	} {
		r := runCLI(t, nil, args...)
		assert.Equal(t, ExitError, r.code, r.stderr)
		assert.Contains(t, r.stderr, "backup of another release: it was taken from release staging in namespace ml-staging")
		assert.Contains(t, r.stderr, "--force")
		assert.NotContains(t, r.stderr, "kubeconfig", "refused before the cluster is touched")
	}
	r := runCLI(t, nil, "restore", other, "--yes", "--force", "--kubeconfig", "/nonexistent")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "--force: restoring a backup of release staging")
	assert.Contains(t, r.stderr, "kubeconfig", "with --force it goes on (to the cluster)")
}

// A negative --jobs is refused with the fix, before the backup or the cluster is read.
func TestRestoreRefusesNegativeJobs(t *testing.T) {
	r := runCLI(t, nil, "restore", filepath.Join(t.TempDir(), "no-such-backup"), "--yes", "--jobs", "-2", "--kubeconfig", "/nonexistent")
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--jobs -2: give 1 or more pg_restore jobs")
	assert.NotContains(t, r.stderr, "no-such-backup")
	assert.NotContains(t, r.stderr, "kubeconfig")
}

// A backup taken with --encrypt-to: list shows it sealed; verify and restore without the key
// are usage errors naming --identity (nothing changes); with age-keygen's key file they work;
// a key that is not age's is refused before the database is read.
func TestBackupEncryptedCLI(t *testing.T) {
	ctx := context.Background()
	s, want, runIt := localBackupCLI(t, 500)
	dir := t.TempDir()
	local := []string{"--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir}
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	require.NoError(t, os.WriteFile(keyFile, []byte("# created: by the test\n"+key.String()+"\n"), 0o600))

	code, out, errs := runIt(append([]string{"backup", "--dir", dir, "--encrypt-to", "age1notakey"}, local...)...)
	assert.Equal(t, ExitUsage, code, out+errs)
	assert.Contains(t, errs, "--encrypt-to \"age1notakey\"")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused key takes no backup")

	code, out, errs = runIt(append([]string{"backup", "--dir", dir, "--encrypt-to", key.Recipient().String(), "-o", "json"}, local...)...)
	require.Equal(t, 0, code, out+errs)
	var res struct {
		Data struct {
			Path       string
			Verified   bool
			Encryption *struct{ Recipients []string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Data.Verified)
	require.NotNil(t, res.Data.Encryption)
	assert.Equal(t, []string{key.Recipient().String()}, res.Data.Encryption.Recipients)
	code, out, errs = runIt("backup", "list", "--dir", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "sealed")
	assert.Contains(t, out, "verified", "the sealed files' checksums are checked without the key")

	code, out, errs = runIt("backup", "verify", res.Data.Path)
	assert.Equal(t, ExitUsage, code, out+errs)
	assert.Contains(t, errs, "--identity key.txt")
	code, out, errs = runIt("backup", "verify", res.Data.Path, "--full", "--identity", keyFile)
	require.Equal(t, 0, code, out+errs)

	_, err = s.Psql(ctx, s.Database, "DELETE FROM metrics")
	require.NoError(t, err)
	emptied, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	code, out, errs = runIt(append([]string{"restore", res.Data.Path, "--yes"}, local...)...)
	assert.Equal(t, ExitUsage, code, out+errs)
	assert.Contains(t, errs, "--identity")
	got, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, emptied, got, "a refused restore changes nothing")
	code, out, errs = runIt(append([]string{"restore", res.Data.Path, "--yes", "--identity", keyFile}, local...)...)
	require.Equal(t, 0, code, out+errs)
	got, err = pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// backup prune: a dry run names what would go and removes nothing; the run removes only
// those; a command without a rule is a usage error that touches nothing.
func TestBackupPruneCLI(t *testing.T) {
	parent := t.TempDir()
	var dirs []string
	for _, daysAgo := range []int{1, 5, 10} {
		started := time.Now().Add(-time.Duration(daysAgo) * 24 * time.Hour).UTC()
		dir := fakeBackupDir(t, parent, "polyaxon-"+started.Format(backup.TimestampLayout), "polyaxon", "polyaxon", []byte("PGDMP dump"))
		m, err := backup.ReadManifest(dir)
		require.NoError(t, err)
		m.StartedAt = started
		b, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, backup.ManifestFile), b, 0o600))
		dirs = append(dirs, dir)
	}
	unfinished := filepath.Join(parent, "polyaxon-20200101T000000Z")
	require.NoError(t, os.Mkdir(unfinished, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(unfinished, backup.SecretsFile), []byte("{}"), 0o600))

	r := runCLI(t, nil, "backup", "prune", "--dir", parent)
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--keep-last N")

	r = runCLI(t, nil, "backup", "prune", "--dir", parent, "--keep-last", "1", "--keep-within", "72h", "--dry-run", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var res struct {
		Data struct {
			DryRun  bool
			Backups []struct {
				Path    string
				Removed bool
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.True(t, res.Data.DryRun)
	var would []string
	for _, b := range res.Data.Backups {
		if b.Removed {
			would = append(would, b.Path)
		}
	}
	assert.ElementsMatch(t, []string{dirs[1], dirs[2]}, would)
	for _, d := range dirs {
		assert.DirExists(t, d, "a dry run removes nothing")
	}

	r = runCLI(t, nil, "backup", "prune", "--dir", parent, "--keep-last", "1", "--keep-within", "72h")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)`+regexp.QuoteMeta(dirs[2])+` .* removed +no rule keeps it`, r.stdout)
	assert.DirExists(t, dirs[0])
	assert.NoDirExists(t, dirs[1])
	assert.NoDirExists(t, dirs[2])
	assert.DirExists(t, unfinished, "what is not a finished backup is left alone")
}
