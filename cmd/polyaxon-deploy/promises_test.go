package main

// The README's promises, each through the command as a user runs it. The checks' and the
// pipeline's own logic have their own tests; these fail when the wiring between a flag or a
// profile and that logic breaks (e.g. a policy hard-coded in the command).

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// helmRecord is a revision in Helm's own storage (a Secret labelled owner=helm).
func helmRecord(rev int, status string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.polyaxon.v%d", rev), Namespace: "polyaxon",
		Labels: map[string]string{"owner": "helm", "name": "polyaxon", "status": status, "version": strconv.Itoa(rev)}}}
}

// productionClusterWith is productionCluster plus objs.
func productionClusterWith(t *testing.T, objs ...runtime.Object) cliResult {
	t.Helper()
	gpuTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	all := append([]runtime.Object{
		fakeNode("core-1", "core", nil, false), fakeNode("core-2", "core", nil, false),
		fakeNode("gpu-1", "experiments", gpuTaint, true), fakeNode("build-1", "builds", nil, false),
	}, objs...)
	return runCLI(t, fakeSettings(t, all...), "check", "--pre", "-o", "json")
}

func nfsDefault(annotation string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{annotation: "true"}}, Provisioner: "nfs.csi.k8s.io"}
}

func checkResult(t *testing.T, r cliResult, id string) (status, detail string) {
	t.Helper()
	doc, _ := parseCheck(t, r.stdout)
	for _, c := range doc.Checks {
		if c.ID == id {
			return c.Status, c.Detail
		}
	}
	t.Fatalf("no check %s in\n%s", id, r.stdout)
	return "", ""
}

// README, check-release-state: "The release is not stuck in pending-install|upgrade|rollback;
// fix with polyaxon-deploy recover". Every pending state stops the check run (exit 3).
func TestCheckPreRefusesEveryPendingState(t *testing.T) {
	sc := nfsDefault("storageclass.kubernetes.io/is-default-class")
	for _, st := range []string{"pending-install", "pending-upgrade", "pending-rollback"} {
		t.Run(st, func(t *testing.T) {
			r := productionClusterWith(t, sc, helmRecord(1, "deployed"), helmRecord(2, st))
			assert.Equal(t, ExitCheckFailed, r.code, r.stderr)
			status, detail := checkResult(t, r, "release-state")
			assert.Equal(t, "failed", status)
			assert.Contains(t, detail, "revision 2 is "+st)
			assert.Contains(t, r.stderr, "polyaxon-deploy recover", "the failure names the fix")
		})
	}
	// The newest revision decides: an old pending one that a later run replaced is history.
	r := productionClusterWith(t, sc, helmRecord(1, "pending-install"), helmRecord(2, "deployed"))
	assert.Equal(t, ExitOK, r.code, r.stderr)
	status, _ := checkResult(t, r, "release-state")
	assert.Equal(t, "passed", status)
}

// A failed newest revision does not stop an upgrade (it replaces it) but is said: a warning,
// which --strict turns into exit 4.
func TestCheckPreWarnsOnAFailedRevision(t *testing.T) {
	sc := nfsDefault("storageclass.kubernetes.io/is-default-class")
	r := productionClusterWith(t, sc, helmRecord(1, "deployed"), helmRecord(2, "failed"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	status, detail := checkResult(t, r, "release-state")
	assert.Equal(t, "warning", status)
	assert.Contains(t, detail, "revision 2 is failed")
	assert.Contains(t, r.stderr, "revision 2 is failed")

	gpuTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	strict := runCLI(t, fakeSettings(t, fakeNode("core-1", "core", nil, false), fakeNode("core-2", "core", nil, false),
		fakeNode("gpu-1", "experiments", gpuTaint, true), fakeNode("build-1", "builds", nil, false),
		sc, helmRecord(1, "deployed"), helmRecord(2, "failed")), "check", "--pre", "--strict")
	assert.Equal(t, ExitWarnings, strict.code, strict.stderr)
}

// check-storage-class: "the one named in values, or a default one". Clusters set up before
// Kubernetes 1.6 (and some installers still) mark the default with the beta annotation.
func TestCheckPreAcceptsTheBetaDefaultStorageClass(t *testing.T) {
	r := productionClusterWith(t, nfsDefault("storageclass.beta.kubernetes.io/is-default-class"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	status, detail := checkResult(t, r, "storage-class")
	assert.Equal(t, "passed", status, detail)
	// check-artifacts-store judges the default class's provisioner, the beta-marked one too.
	status, detail = checkResult(t, r, "artifacts-store")
	assert.Equal(t, "passed", status, detail)
	assert.Contains(t, detail, "ReadWriteMany from StorageClass standard")
	block := nfsDefault("storageclass.beta.kubernetes.io/is-default-class")
	block.Provisioner = "ebs.csi.aws.com"
	r = productionClusterWith(t, block)
	assert.Equal(t, ExitCheckFailed, r.code, r.stderr)
	status, detail = checkResult(t, r, "artifacts-store")
	assert.Equal(t, "failed", status, detail)
	assert.Contains(t, detail, "StorageClass standard (ebs.csi.aws.com) gives volumes one node at a time")

	// The same class without either annotation is no default: the check fails.
	plain := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "nfs.csi.k8s.io"}
	r = productionClusterWith(t, plain)
	assert.Equal(t, ExitCheckFailed, r.code, r.stderr)
	status, _ = checkResult(t, r, "storage-class")
	assert.Equal(t, "failed", status)
}

// kube137Fixture is an empty release fixture whose Helm sees Kubernetes 1.37, the version the
// chart's admission policies need.
func kube137Fixture(t *testing.T) *rt.Fixture {
	t.Helper()
	fx := rt.New(t)
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	fx.Config.Capabilities = &caps
	return fx
}

// releaseFixture is a release installed with the embedded chart and profile on offline Helm
// fixtures, its stored inputs naming profile.
func releaseFixture(t *testing.T, profile string) *rt.Fixture {
	t.Helper()
	fx := kube137Fixture(t)
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = fx.Client.Install(context.Background(), ch, map[string]any{}, release.WithInputs(release.Inputs{Profile: profile}))
	require.NoError(t, err)
	// Helm's record as a Secret too, where backups read the release from (Helm's default driver).
	rel, err := fx.Config.Releases.Last(rt.Name)
	require.NoError(t, err)
	require.NoError(t, driver.NewSecrets(fx.Clientset.CoreV1().Secrets(rt.Namespace)).Create(
		fmt.Sprintf("sh.helm.release.v1.%s.v%d", rel.Name, rel.Version), rel))
	return fx
}

// runOnFixture runs the CLI with the release commands on fx.
func runOnFixture(t *testing.T, fx *rt.Fixture, args ...string) cliResult {
	t.Helper()
	r := runForLeaks(t, fakeSettingsOn(t, fx.Clientset), fx, args...)
	return r.r
}

func revisions(t *testing.T, fx *rt.Fixture) map[int]string {
	t.Helper()
	h, err := fx.Config.Releases.History(rt.Name)
	require.NoError(t, err)
	out := map[int]string{}
	for _, r := range h {
		out[r.Version] = r.Info.Status.String()
	}
	return out
}

// README: "With the production profile no upgrade runs without a verified backup", and the
// command's help: "--skip-backup needs --yes". The profile's policy reaches the pipeline.
func TestUpgradeProductionRefusesSkipBackupWithoutYes(t *testing.T) {
	fx := releaseFixture(t, "production")
	r := runOnFixture(t, fx, "upgrade", "--dry-run", "--ignore", "all", "--skip-backup")
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the profile requires a backup before every upgrade: --skip-backup needs --yes")
	assert.Equal(t, map[int]string{1: "deployed"}, revisions(t, fx))

	r = runOnFixture(t, fx, "upgrade", "--dry-run", "--ignore", "all", "--skip-backup", "--yes")
	assert.Equal(t, ExitOK, r.code, r.stderr)

	// The development profile asks for no backup: --skip-backup alone is enough.
	dev := releaseFixture(t, "development")
	r = runOnFixture(t, dev, "upgrade", "--dry-run", "--ignore", "all", "--skip-backup")
	assert.Equal(t, ExitOK, r.code, r.stderr)
}

// A production upgrade takes the backup before anything else changes: where none can be taken
// (no Postgres pod answers here) it stops, before the migration Job and before Helm.
func TestUpgradeProductionStopsWhenNoBackupCanBeTaken(t *testing.T) {
	fx := releaseFixture(t, "production")
	r := runOnFixture(t, fx, "upgrade", "--ignore", "all", "--set", "gateway.replicas=3")
	assert.Equal(t, ExitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "backing up the database")
	jobs, err := fx.Clientset.BatchV1().Jobs(rt.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, jobs.Items, "no migration Job before a backup")
	assert.Equal(t, map[int]string{1: "deployed"}, revisions(t, fx))
}

// --restore-on-failure through the command, on a real PostgreSQL (the backup taken with
// --local): a migration that wrote to the database and then failed is undone only when asked;
// otherwise the error says how.
func TestUpgradeRestoreOnFailureThroughTheCommand(t *testing.T) {
	ctx := context.Background()
	s := pgtest.New(t, pgtest.WithFastUnsafe())
	require.NoError(t, pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: 200}))
	seeded, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	t.Setenv("PGPASSWORD", s.Password())
	pgFlags := []string{"--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir, "--pg-database", s.Database, "--pg-user", s.User}

	for _, restore := range []bool{false, true} {
		t.Run(fmt.Sprintf("restore-on-failure=%t", restore), func(t *testing.T) {
			fx := releaseFixture(t, "production")
			migrated := failMigrationAfter(t, fx, func() {
				_, err := s.Psql(ctx, s.Database, "DELETE FROM metrics; ALTER TABLE runs ADD COLUMN migrated boolean NOT NULL DEFAULT true")
				require.NoError(t, err)
			})
			args := append([]string{"upgrade", "--ignore", "all", "--backup-dir", t.TempDir(), "--set", "gateway.replicas=3"}, pgFlags...)
			if restore {
				args = append(args, "--restore-on-failure")
			}
			r := runOnFixture(t, fx, args...)
			require.Equal(t, ExitError, r.code, r.stderr)
			require.True(t, migrated(), "the migration ran: %s", r.stderr)
			got, err := pgtest.Checksums(ctx, s, s.Database)
			if restore {
				require.NoError(t, err)
				assert.Equal(t, seeded, got, "the backup taken before the migration is back")
				assert.Contains(t, r.stderr, "database restored from ")
			} else {
				if err == nil {
					assert.NotEqual(t, seeded, got, "without --restore-on-failure the migration's changes stay")
				}
				assert.Contains(t, r.stderr, "restore it with `polyaxon-deploy restore ")
				assert.NotContains(t, r.stderr, "database restored from ")
				// Put the data back for the next run, as the message says.
				dir := strings.TrimSuffix(strings.SplitN(strings.SplitN(r.stderr, "polyaxon-deploy restore ", 2)[1], "`", 2)[0], " ")
				rr := runOnFixture(t, fx, append([]string{"restore", dir, "--yes"}, pgFlags...)...)
				require.Equal(t, ExitOK, rr.code, rr.stderr)
				got, err = pgtest.Checksums(ctx, s, s.Database)
				require.NoError(t, err)
				assert.Equal(t, seeded, got, "restore DIR puts the data back")
			}
			assert.Equal(t, map[int]string{1: "deployed"}, revisions(t, fx), "no Deployment changed")
		})
	}
}

// failMigrationAfter plays the migration Job's pod: when the installer creates the Job it runs
// write (the migration's statements) and marks the Job failed. It reports whether it ran.
func failMigrationAfter(t *testing.T, fx *rt.Fixture, write func()) func() bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() {
		ran := false
		defer func() { done <- ran }()
		_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			jobs, err := fx.Clientset.BatchV1().Jobs(rt.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(jobs.Items) == 0 {
				return false, nil
			}
			j := jobs.Items[0]
			write()
			ran = true
			now := metav1.Now()
			j.Status.Failed = 1
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now})
			_, err = fx.Clientset.BatchV1().Jobs(rt.Namespace).UpdateStatus(ctx, &j, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}()
	var ran *bool
	return func() bool {
		if ran == nil {
			cancel()
			v := <-done
			ran = &v
		}
		return *ran
	}
}
