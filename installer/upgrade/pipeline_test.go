package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

type fakeBackuper struct {
	rec                              *recorder
	backupErr, verifyErr, restoreErr error
}

func (b *fakeBackuper) Backup(context.Context) (string, error) {
	b.rec.add("backup")
	return "/backups/polyaxon-20260101T000000Z", b.backupErr
}
func (b *fakeBackuper) Verify(_ context.Context, dir string) error {
	b.rec.add("verify " + dir)
	return b.verifyErr
}
func (b *fakeBackuper) Restore(_ context.Context, dir string) error {
	b.rec.add("restore " + dir)
	return b.restoreErr
}

func (b *fakeBackuper) RestoreInto(_ context.Context, dir string, next *helmrelease.Release) (*backup.RestoreReport, error) {
	b.rec.add("restore " + dir + " into revision " + fmt.Sprint(next.Version))
	return &backup.RestoreReport{Tables: []string{"public.db_run"}, Rows: map[string]int64{"public.db_run": 3}}, b.restoreErr
}

type fakeMigrator struct {
	rec   *recorder
	f     *rt.Fixture
	err   error
	waits int // helm waits seen when the migration ran: proves it ran before the upgrade
}

func (m *fakeMigrator) Run(_ context.Context, job *batchv1.Job) (*migrate.Result, error) {
	m.rec.add("migrate " + job.Name)
	m.waits = m.f.Kube.Waits()
	if m.err != nil {
		return nil, m.err
	}
	return &migrate.Result{Job: job.Name}, nil
}

// fakeAction is the command's side of the seam: checks recorded, a migration Job named as
// the chart names it.
type fakeAction struct {
	MigrationJobs
	rec        *recorder
	postChecks error
}

func (a *fakeAction) Checks(_ context.Context, pre bool) error {
	if pre {
		a.rec.add("checks")
		return nil
	}
	a.rec.add("post-checks")
	return a.postChecks
}

type setup struct {
	f   *rt.Fixture
	rec *recorder
	b   *fakeBackuper
	m   *fakeMigrator
	a   *fakeAction
	out *rt.SyncBuffer
	o   Options
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	f := rt.New(t)
	_, err := f.Client.Install(context.Background(), rt.Chart("2.0.0", "2.15.0", nil),
		map[string]any{"gateway": map[string]any{"replicas": 2}},
		release.WithInputs(release.Inputs{Profile: "production", Set: []string{"gateway.replicas=2"}}))
	require.NoError(t, err)
	rec := &recorder{}
	s := &setup{f: f, rec: rec, b: &fakeBackuper{rec: rec}, m: &fakeMigrator{rec: rec, f: f}, out: &rt.SyncBuffer{},
		a: &fakeAction{rec: rec, MigrationJobs: func(context.Context) (*batchv1.Job, error) {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: migrate.JobName(rt.Name, "2.16.0")}}, nil
		}}}
	s.o = Options{
		Release:        f.Client,
		Chart:          rt.Chart("2.1.0", "2.16.0", map[string]string{UpgradeFromAnnotation: ">=2.0.0-0"}),
		Values:         map[string]any{"gateway": map[string]any{"replicas": 3}},
		Inputs:         release.Inputs{Profile: "production", Set: []string{"gateway.replicas=3"}},
		Timeout:        5 * time.Second,
		Action:         s.a,
		Backuper:       s.b,
		BackupRequired: true,
		Migrator:       s.m,
		Out:            s.out,
		Observer:       rec,
		PollInterval:   5 * time.Millisecond,
	}
	return s
}

func (s *setup) statuses(t *testing.T) map[int]string {
	t.Helper()
	h, err := s.f.Client.History(context.Background(), 0)
	require.NoError(t, err)
	out := map[int]string{}
	for _, r := range h {
		out[r.Revision] = r.Status
	}
	return out
}

func (s *setup) lockReleased(t *testing.T) {
	t.Helper()
	_, err := s.f.Clientset.CoordinationV1().Leases(rt.Namespace).Get(context.Background(), release.LockName(rt.Name), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "lock lease must be released, got %v", err)
}

func TestPipelineUpgradesInOrder(t *testing.T) {
	s := newSetup(t)
	res, err := Run(context.Background(), s.o)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"start lock", "start checks", "checks", "start inspect release", "start version guard",
		"skip stop the database writers", "start backup", "backup", "start verify backup", "verify /backups/polyaxon-20260101T000000Z",
		"start rollback point", "skip postgres new volume", "skip postgres restore",
		"skip postgres new database", "skip postgres restore into the new database",
		"start migrate", "migrate polyaxon-migrate-2-16-0", "start apply", "skip start the database writers", "start post-checks", "post-checks",
	}, s.rec.Events())
	assert.Equal(t, 1, s.m.waits, "migrations ran before Helm touched any Deployment (only the install waited)")
	assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, s.statuses(t))
	require.NotNil(t, res.Release)
	assert.Equal(t, 2, res.Release.Revision)
	assert.Equal(t, 1, res.PreviousRevision)
	assert.Equal(t, "/backups/polyaxon-20260101T000000Z", res.BackupDir)
	assert.Equal(t, "polyaxon-migrate-2-16-0", res.Migration.Job)
	assert.Equal(t, []string{"Deployment/polyaxon-gateway"}, res.Diff.Changed)
	assert.Contains(t, s.out.String(), "polyaxon/polyaxon-api:2.15.0 -> polyaxon/polyaxon-api:2.16.0")
	in, rev, err := s.f.Client.LoadInputs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, rev)
	assert.Equal(t, s.o.Inputs, in)
	s.lockReleased(t)
}

func TestPipelineFailedMigrationLeavesReleaseAndSaysHowToRestore(t *testing.T) {
	s := newSetup(t)
	s.m.err = errors.New("migration Job polyaxon/polyaxon-migrate-2-16-0 failed: relation exists")
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhaseMigrate, pe.Phase)
	assert.Contains(t, err.Error(), "relation exists")
	assert.Contains(t, err.Error(), "no Deployment was changed: the release stays at revision 1")
	assert.Contains(t, err.Error(), "polyaxon-deploy restore /backups/polyaxon-20260101T000000Z")
	assert.Contains(t, err.Error(), "release unchanged: still at revision 1")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	assert.NotContains(t, s.rec.Events(), "restore /backups/polyaxon-20260101T000000Z")
	assert.NotContains(t, s.rec.Events(), "start apply")
	s.lockReleased(t)
}

func TestPipelineFailedMigrationRestoresOnRequest(t *testing.T) {
	s := newSetup(t)
	s.m.err = errors.New("boom")
	s.o.RestoreOnFailure = true
	_, err := Run(context.Background(), s.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database restored from /backups/polyaxon-20260101T000000Z")
	assert.Contains(t, s.rec.Events(), "restore /backups/polyaxon-20260101T000000Z")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
}

func TestPipelineFailedHelmUpgradeRollsBackThenRestores(t *testing.T) {
	s := newSetup(t)
	s.o.RestoreOnFailure = true
	s.f.Kube.WaitErrors[2] = errors.New("Deployment polyaxon-gateway not ready")
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhaseApply, pe.Phase)
	assert.Contains(t, err.Error(), "Deployment polyaxon-gateway not ready")
	assert.Contains(t, err.Error(), "rolled back to revision 1 (chart 2.0.0, Polyaxon 2.15.0), which is running again")
	assert.Equal(t, map[int]string{1: "superseded", 2: "failed", 3: "deployed"}, s.statuses(t))
	ev := s.rec.Events()
	// The application goes back first, then its database.
	requireOrder(t, ev, "cleanup rollback point", "restore /backups/polyaxon-20260101T000000Z")
	in, _, err := s.f.Client.LoadInputs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"gateway.replicas=2"}, in.Set, "inputs follow the rolled-back revision")
	s.lockReleased(t)
}

func TestPipelineFailedPostChecksRollBack(t *testing.T) {
	s := newSetup(t)
	s.a.postChecks = errors.New("gateway not ready")
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhasePostChecks, pe.Phase)
	assert.Contains(t, err.Error(), "rolled back to revision 1")
	assert.Equal(t, map[int]string{1: "superseded", 2: "superseded", 3: "deployed"}, s.statuses(t))
}

// An upgrade to a release without the run policies lowers enforce before its apply; when it
// fails, the undo labels the namespace for the revision it rolls back to, whether Helm's wait
// failed (before the upgrade's own labels) or the post-checks did (after them).
func TestPipelineUndoLabelsNamespaceForTheRevisionBack(t *testing.T) {
	restricted := release.PodSecurity{Enforce: "restricted", Warn: "restricted", Audit: "restricted"}
	for name, fail := range map[string]func(s *setup){
		"helm's wait fails": func(s *setup) { s.f.Kube.WaitErrors[2] = errors.New("Deployment polyaxon-gateway not ready") },
		"post-checks fail": func(s *setup) {
			s.a.postChecks = errors.New("gateway not ready")
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newSetup(t)
			_, err := s.f.Client.EnsureNamespace(ctx, restricted)
			require.NoError(t, err)
			s.o.PodSecurity = &release.PodSecurity{Enforce: "baseline", Warn: "restricted", Audit: "restricted"}
			var asked []int
			s.o.RevisionPodSecurity = func(_ context.Context, rev *helmrelease.Release) (release.PodSecurity, error) {
				asked = append(asked, rev.Version)
				return restricted, nil
			}
			fail(s)
			_, err = Run(ctx, s.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "rolled back to revision 1")
			assert.Equal(t, []int{1}, asked, "the labels of the revision rolled back to")
			ns, err := s.f.Clientset.CoreV1().Namespaces().Get(ctx, rt.Namespace, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "revision 1's level is back")
		})
	}
}

func TestPipelineInterruptedUpgradeEndsFailedAndIsNotRolledBack(t *testing.T) {
	s := newSetup(t)
	started, unblock := s.f.Kube.BlockWaits()
	defer unblock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := Run(ctx, s.o); errc <- err }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("helm never waited")
	}
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("pipeline did not return after cancellation")
	}
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "interrupted: not rolled back")
	assert.Contains(t, err.Error(), "polyaxon-deploy restore /backups/polyaxon-20260101T000000Z")
	assert.Equal(t, map[int]string{1: "deployed", 2: "failed"}, s.statuses(t))
	s.lockReleased(t)

	// A rerun succeeds.
	s.f.Kube.StopBlocking()
	_, err = Run(context.Background(), s.o)
	require.NoError(t, err)
	assert.Equal(t, "deployed", s.statuses(t)[3])
}

func TestPipelineBackupPolicy(t *testing.T) {
	s := newSetup(t)
	s.o.SkipBackup = true
	_, err := Run(context.Background(), s.o)
	var pol *PolicyError
	require.ErrorAs(t, err, &pol)
	assert.Contains(t, err.Error(), "--skip-backup needs --yes")
	assert.Empty(t, s.rec.Events(), "refused before anything ran")

	s.o.Yes = true
	_, err = Run(context.Background(), s.o)
	require.NoError(t, err)
	assert.Contains(t, s.rec.Events(), "skip backup")
	assert.Contains(t, s.rec.Events(), "skip verify backup")
	assert.NotContains(t, s.rec.Events(), "backup")

	// A required backup that cannot be taken stops the upgrade.
	s2 := newSetup(t)
	s2.o.Backuper = nil
	_, err = Run(context.Background(), s2.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "requires a backup")
	assert.Equal(t, map[int]string{1: "deployed"}, s2.statuses(t))

	// A failed verification stops it too.
	s3 := newSetup(t)
	s3.b.verifyErr = errors.New("sha256 mismatch")
	_, err = Run(context.Background(), s3.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sha256 mismatch")
	assert.NotContains(t, s3.rec.Events(), "start migrate")
}

func TestPipelineVersionGuardStopsBeforeBackup(t *testing.T) {
	s := newSetup(t)
	s.o.Chart = rt.Chart("1.9.0", "2.14.0", nil)
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhaseGuard, pe.Phase)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.NotContains(t, s.rec.Events(), "backup")
	s.lockReleased(t)
}

func TestPipelineRefusesConcurrentRun(t *testing.T) {
	s := newSetup(t)
	held, err := s.f.Client.Lock(release.WithIdentity("other-run")).Acquire(context.Background())
	require.NoError(t, err)
	defer held.Release(context.Background())
	_, err = Run(context.Background(), s.o)
	var le *release.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "other-run", le.Holder)
	assert.Equal(t, []string{"start lock", "fail lock"}, s.rec.Events())
}

func TestPipelineRefusesPendingRelease(t *testing.T) {
	s := newSetup(t)
	r, err := s.f.Config.Releases.Get(rt.Name, 1)
	require.NoError(t, err)
	pending := *r
	info := *r.Info
	pending.Info, pending.Version = &info, 2
	pending.Info.Status = "pending-upgrade"
	require.NoError(t, s.f.Config.Releases.Create(&pending))
	_, err = Run(context.Background(), s.o)
	var pe *release.PendingError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "polyaxon-deploy recover")
	// A crashed run's pending revision is left for `recover`, not marked failed on the way out.
	assert.Equal(t, "pending-upgrade", s.statuses(t)[2])
}

func TestPipelineDryRunChangesNothing(t *testing.T) {
	s := newSetup(t)
	s.o.DryRun = true
	res, err := Run(context.Background(), s.o)
	require.NoError(t, err)
	assert.True(t, res.DryRun)
	assert.Equal(t, []string{"start checks", "checks", "start inspect release", "start version guard"}, s.rec.Events())
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	assert.Equal(t, []string{"Deployment/polyaxon-gateway"}, res.Diff.Changed)
}

func TestPipelineConfirmDiffCanAbort(t *testing.T) {
	s := newSetup(t)
	s.o.ConfirmDiff = func(d release.Diff) error {
		return fmt.Errorf("upgrade cancelled: %d changes not confirmed", len(d.Changed))
	}
	_, err := Run(context.Background(), s.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not confirmed")
	assert.NotContains(t, s.rec.Events(), "backup")
}

func pgValues(tag string) map[string]any {
	return map[string]any{"gateway": map[string]any{"replicas": 3}, "postgresql": map[string]any{"image": map[string]any{"tag": tag}}}
}

// stsController marks created StatefulSets ready and records the annotations they had.
func stsController(t *testing.T, s *setup) (seen func() []map[string]string, stop func()) {
	var mu sync.Mutex
	var ann []map[string]string
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			list, err := s.f.Clientset.AppsV1().StatefulSets(rt.Namespace).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				sts := &list.Items[i]
				if sts.Status.ReadyReplicas > 0 {
					continue
				}
				mu.Lock()
				ann = append(ann, sts.Annotations)
				mu.Unlock()
				// What the StatefulSet controller reports once its one pod is ready on the newest spec.
				sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1,
					AvailableReplicas: 1, CurrentReplicas: 1, UpdatedReplicas: 1, CurrentRevision: "r1", UpdateRevision: "r1"}
				_, _ = s.f.Clientset.AppsV1().StatefulSets(rt.Namespace).UpdateStatus(context.Background(), sts, metav1.UpdateOptions{})
			}
		}
	}()
	return func() []map[string]string {
			mu.Lock()
			defer mu.Unlock()
			return append([]map[string]string(nil), ann...)
		},
		func() { close(done) }
}

func TestPipelinePostgresMajorUpgradeNeedsFlag(t *testing.T) {
	s := newSetup(t)
	s.o.Values = pgValues("17")
	res, err := Run(context.Background(), s.o)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, err.Error(), "from 16 to 17")
	assert.Contains(t, err.Error(), "--allow-postgres-major-upgrade")
	assert.Equal(t, &MajorChange{From: "16", To: "17"}, res.PostgresMajor)

	s.o.AllowPostgresMajorUpgrade = true
	s.o.SkipBackup, s.o.Yes = true, true
	_, err = Run(context.Background(), s.o)
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, err.Error(), "needs a verified backup taken now")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
}

// Moving the database to or from CloudNativePG by an upgrade would leave the platform on an
// empty database: refused before anything is written, with the way to move it.
func TestPipelineRefusesToMoveTheDatabaseToCloudNativePG(t *testing.T) {
	s := newSetup(t)
	s.o.Values = map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}
	_, err := Run(context.Background(), s.o)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, err.Error(), "the database would move from the StatefulSet to a CloudNativePG Cluster (postgresql.mode, postgresql.enabled): the new one would start empty")
	assert.Contains(t, err.Error(), "or pass --move-postgres")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	assert.Equal(t, []string{"start lock", "start checks", "checks", "start inspect release", "start version guard", "fail version guard", "cleanup inspect release", "cleanup checks"}, s.rec.Events(),
		"no backup, no migration, nothing applied")
}

// --move-postgres moves between the two in-cluster modes, with a backup, and only when the mode
// changes: each other case is refused before anything is written.
func TestPipelineMovePostgresRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		skip   bool
		want   string
	}{
		{"same mode", map[string]any{}, false, "--move-postgres: the database stays on the StatefulSet (postgresql.mode is unchanged)"},
		{"external", map[string]any{"postgresql": map[string]any{"enabled": false}, "externalServices": map[string]any{"postgresql": map[string]any{"host": "db.example", "password": "x"}}},
			false, "not from the StatefulSet to an external database"},
		{"no backup", map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}, true, "--move-postgres carries the data by a verified backup taken now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t)
			s.o.Values, s.o.MovePostgres = tc.values, true
			s.o.SkipBackup, s.o.Yes = tc.skip, tc.skip
			_, err := Run(context.Background(), s.o)
			var ve *VersionError
			require.ErrorAs(t, err, &ve)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
			assert.NotContains(t, s.rec.Events(), "backup", "refused before the backup")
		})
	}
}

// The new database's objects: the Postgres objects the old revision lacks, marked for Helm's
// adoption, Secrets first; what both revisions have (a kept Secret, the old server) is left out.
func TestNewDatabaseObjects(t *testing.T) {
	old := `---
# Source: polyaxon/templates/postgresql/statefulset.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: px-postgresql, labels: {app.kubernetes.io/component: postgresql}}
---
# Source: polyaxon/templates/postgresql/secret.yaml
apiVersion: v1
kind: Secret
metadata: {name: px-postgresql, labels: {app.kubernetes.io/component: postgresql}}
`
	next := `---
# Source: polyaxon/templates/postgresql/cluster.yaml
apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: px-postgresql, labels: {app.kubernetes.io/component: postgresql}}
spec: {instances: 3}
---
# Source: polyaxon/templates/postgresql/secret.yaml
apiVersion: v1
kind: Secret
metadata: {name: px-postgresql-auth, labels: {app.kubernetes.io/component: postgresql}}
---
# Source: polyaxon/templates/api/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: px-api, labels: {app.kubernetes.io/component: api}}
`
	objs, err := newDatabaseObjects(old, next, "px", "ml")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, []string{"Secret px-postgresql-auth", "Cluster px-postgresql"}, []string{objs[0].kind + " " + objs[0].name, objs[1].kind + " " + objs[1].name})
	assert.Contains(t, objs[1].manifest, "meta.helm.sh/release-name: px")
	assert.Contains(t, objs[1].manifest, "meta.helm.sh/release-namespace: ml")
	assert.Contains(t, objs[1].manifest, "app.kubernetes.io/managed-by: Helm")
	assert.Contains(t, objs[1].manifest, "namespace: ml")
	assert.Contains(t, objs[1].manifest, "instances: 3")
}

// A CloudNativePG Cluster's major upgrade cannot be rolled back: only with the flag, after a
// verified backup.
func TestPipelineCloudNativePGMajorNeedsFlag(t *testing.T) {
	s := newSetup(t)
	cnpg := map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}
	_, err := s.f.Client.Upgrade(context.Background(), rt.Chart("2.0.0", "2.15.0", nil), cnpg)
	require.NoError(t, err)
	s.o.Values = map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg", "cloudnativepg": map[string]any{"image": map[string]any{"tag": "17.2"}}}}
	_, err = Run(context.Background(), s.o)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, err.Error(), "from 16 to 17: the operator upgrades the data in place")
	assert.Contains(t, err.Error(), "--allow-postgres-major-upgrade")
	s.o.AllowPostgresMajorUpgrade, s.o.SkipBackup, s.o.Yes = true, true, true
	_, err = Run(context.Background(), s.o)
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, err.Error(), "needs a verified backup taken now")
}

func TestPipelinePostgresMajorUpgradeDumpsSwitchesRestoresThenMigrates(t *testing.T) {
	s := newSetup(t)
	s.o.Values = pgValues("17")
	s.o.AllowPostgresMajorUpgrade = true
	seen, stop := stsController(t, s)
	defer stop()
	res, err := Run(context.Background(), s.o)
	require.NoError(t, err)
	assert.Equal(t, &MajorChange{From: "16", To: "17"}, res.PostgresMajor)
	ev := s.rec.Events()
	order := []string{"backup", "verify /backups/polyaxon-20260101T000000Z", "start postgres new volume",
		"restore /backups/polyaxon-20260101T000000Z", "migrate polyaxon-migrate-2-16-0", "start apply"}
	requireOrder(t, ev, order...)
	ann := seen()
	require.Len(t, ann, 1, "one new Postgres StatefulSet created")
	assert.Equal(t, rt.Name, ann[0]["meta.helm.sh/release-name"], "owned by the release so Helm adopts it")
	// Before Helm applied the release, the StatefulSet was deleted (pods orphaned) so Helm
	// creates it instead of patching its claim template.
	_, err = s.f.Clientset.AppsV1().StatefulSets(rt.Namespace).Get(context.Background(), "polyaxon-postgresql", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	assert.Equal(t, "deployed", s.statuses(t)[2])
}

func TestPipelinePostgresMajorUpgradeFailureReturnsToOldServer(t *testing.T) {
	s := newSetup(t)
	s.o.Values = pgValues("17")
	s.o.AllowPostgresMajorUpgrade = true
	s.b.restoreErr = errors.New("pg_restore: connection refused")
	seen, stop := stsController(t, s)
	defer stop()
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhasePGRestore, pe.Phase)
	assert.Contains(t, err.Error(), "Postgres 16 is running again on its volume (the new Postgres 17 volume, a copy made by this run, was deleted)")
	assert.Contains(t, err.Error(), "the Postgres 16 volume was not modified")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	sts, err := s.f.Clientset.AppsV1().StatefulSets(rt.Namespace).Get(context.Background(), "polyaxon-postgresql", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "postgres:16", sts.Spec.Template.Spec.Containers[0].Image)
	assert.Len(t, seen(), 2, "new server, then the old one again")
}

// requireOrder fails unless every event in order happened, each after the one before it (a
// missing event fails too: it has no place in the order).
func requireOrder(t *testing.T, events []string, order ...string) {
	t.Helper()
	last := -1
	for _, e := range order {
		i := slices.Index(events, e)
		require.GreaterOrEqualf(t, i, 0, "event %q did not happen: %v", e, events)
		require.Greaterf(t, i, last, "%q happened before %q: %v", e, order[max(0, slices.Index(order, e)-1)], events)
		last = i
	}
}

func TestPipelinePostgresMajorUpgradeRefusesLeftoverVolume(t *testing.T) {
	s := newSetup(t)
	s.o.Values = pgValues("17")
	s.o.AllowPostgresMajorUpgrade = true
	_, err := s.f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).Create(context.Background(), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-pg17-polyaxon-postgresql-0", Namespace: rt.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = Run(context.Background(), s.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "volume data-pg17-polyaxon-postgresql-0 for Postgres 17 already exists")
	assert.NotContains(t, s.rec.Events(), "restore /backups/polyaxon-20260101T000000Z")
}

// Without an Action the checks and the migration are skipped, and say why; a failing pre-check
// stops the upgrade before anything changes.
func TestPipelineWithoutActionOrWithFailingChecks(t *testing.T) {
	s := newSetup(t)
	s.o.Action, s.o.Migrator = nil, nil
	res, err := Run(context.Background(), s.o)
	require.NoError(t, err)
	status := map[string]phase.PhaseReport{}
	for _, p := range res.Phases {
		status[p.Phase] = p
	}
	for _, p := range []string{PhaseChecks, PhaseMigrate, PhasePostChecks} {
		assert.Equal(t, "skipped", status[p].Status, p)
	}
	assert.Contains(t, status[PhaseMigrate].Detail, "no installer-run migration Job")

	s = newSetup(t)
	s.o.Action = failingChecks{}
	_, err = Run(context.Background(), s.o)
	require.Error(t, err)
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t), "nothing was applied")
}

// failingChecks refuses the release before anything changes.
type failingChecks struct{ MigrationJobs }

func (failingChecks) Checks(context.Context, bool) error {
	return errors.New("preflight: no nodes for pool core")
}

// A move that fails before the apply changes nothing for good: no migration ran, the release
// stays at its revision, and the writers it stopped run again on the old database (here the
// new revision renders no database: the test chart has none).
func TestPipelineMoveThatFailsStartsTheWritersAgain(t *testing.T) {
	s := newSetup(t)
	ctx := context.Background()
	two := int32(2)
	_, err := s.f.Clientset.AppsV1().Deployments(rt.Namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: rt.Namespace, Labels: map[string]string{
			"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": rt.Name, "app.kubernetes.io/component": "gateway"}},
		Spec: appsv1.DeploymentSpec{Replicas: &two},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	s.o.Values = map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}
	s.o.MovePostgres = true
	_, err = Run(ctx, s.o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the new revision renders no database objects for a CloudNativePG Cluster")
	assert.Contains(t, err.Error(), "the platform's database writers started again on the StatefulSet")
	events := s.rec.Events()
	assert.Contains(t, events, "start stop the database writers")
	assert.Contains(t, events, "fail postgres new database")
	assert.NotContains(t, events, "start migrate")
	assert.NotContains(t, events, "start apply")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	d, err := s.f.Clientset.AppsV1().Deployments(rt.Namespace).Get(ctx, "polyaxon-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *d.Spec.Replicas, "the writers run again")
	assert.Empty(t, d.Annotations)
}
