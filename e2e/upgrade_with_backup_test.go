package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
)

// upgradeData is the part of `upgrade -o json`'s data the scenarios read.
type upgradeData struct {
	PreviousRevision int    `json:"previousRevision"`
	BackupDir        string `json:"backupDir"`
	Migration        *struct {
		Job     string `json:"job"`
		Skipped bool   `json:"skipped"`
	} `json:"migration"`
	Phases []phase.PhaseReport `json:"phases"`
}

func (d upgradeData) phaseIndex(name string) int {
	return slices.IndexFunc(d.Phases, func(p phase.PhaseReport) bool {
		return p.Phase == name
	})
}

// upgradeWithBackup (TestLifecycleScenarios): a production release upgraded to a new Polyaxon version
// (a chart copy one minor version up) with a changed value. Before anything changes a backup is written
// and verified (it restores to the same data); the migration Job of the target version runs
// (its pod writes to the release's database) and completes before any Deployment rolls; the
// generated Secrets are unchanged and the data in Postgres is intact.
func upgradeWithBackup(t *testing.T) {
	target := nextVersion(t, 1)
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsUpgrade
	seeded := c.seed(t, ns)

	c.deploy(t, "install", "-n", ns, "--profile", "production").requireExit(t, 0)
	secretsBefore := secretData(t, cs, ns)
	backups := t.TempDir()

	require.Empty(t, appliedMigrations(t, c.pg, dbName(ns)))
	res := c.deploy(t, "upgrade", "-n", ns, "--chart", bumpedChart(t, target), "--set", "gateway.replicas=3",
		"-f", migrationValues(t, recordMigration(target)), "--backup-dir", backups, "-o", "json").requireExit(t, 0)
	r := res.result(t)
	require.NotNil(t, r.Release)
	assert.Equal(t, 2, r.Release.Revision)
	assert.Equal(t, "deployed", r.Release.Status)
	assert.Equal(t, target, r.Release.AppVersion)
	var d upgradeData
	res.data(t, &d)
	assert.Equal(t, 1, d.PreviousRevision)
	assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, cs, ns))

	// The pipeline's order, as it reports it.
	for _, p := range []string{"backup", "verify backup", "migrate", "apply"} {
		i := d.phaseIndex(p)
		require.GreaterOrEqualf(t, i, 0, "phase %q in %+v", p, d.Phases)
		assert.Equalf(t, "ok", d.Phases[i].Status, "phase %q", p)
	}
	assert.Less(t, d.phaseIndex("verify backup"), d.phaseIndex("migrate"))
	assert.Less(t, d.phaseIndex("migrate"), d.phaseIndex("apply"))

	var m *backup.Manifest
	t.Run("a verified backup exists first", func(t *testing.T) {
		require.NotEmpty(t, d.BackupDir)
		assert.Equal(t, backups, filepath.Dir(d.BackupDir), "the backup is under --backup-dir")
		var err error
		m, err = backup.ReadManifest(d.BackupDir)
		require.NoError(t, err)
		assert.Equal(t, releaseName, m.Release)
		assert.Equal(t, ns, m.Namespace)
		assert.Equal(t, 1, m.Revision, "taken from the running revision")
		assert.Equal(t, installedVersion(t), m.AppVersion)
		assert.Equal(t, backup.SourceInCluster, m.Source)
		assert.Equal(t, dbName(ns), m.Database, "dumped through the Postgres pod of this namespace")
		assert.NotEmpty(t, m.SHA256)
		assert.ElementsMatch(t, generatedSecrets, m.SecretNames, "the Secrets are saved with the dump")

		deploy(t, "backup", "verify", d.BackupDir).requireExit(t, 0)

		// The dump holds exactly the data: restore it into a fresh database and compare.
		ctx := ctxT(t, 3*time.Minute)
		restored := dbName(ns) + "_restored"
		require.NoError(t, c.pg.CreateDatabase(ctx, restored))
		local := backup.NewLocalTarget(backup.Conn{Host: c.pg.Host, Port: c.pg.Port, User: c.pg.User, Password: c.pg.Password(), Database: restored},
			backup.WithLocalBinDir(c.pg.BinDir))
		_, err = backup.Restore(ctx, local, d.BackupDir, backup.WithToolsDir(c.pg.BinDir))
		require.NoError(t, err)
		assert.Equal(t, seeded, c.checksumsOf(t, restored), "the backup restores to the data it was taken from")
	})

	t.Run("migration ran and completed before the Deployments rolled", func(t *testing.T) {
		require.NotNil(t, d.Migration)
		assert.Equal(t, migrationJobName(target), d.Migration.Job)
		assert.False(t, d.Migration.Skipped)
		job, err := cs.BatchV1().Jobs(ns).Get(ctxT(t, time.Minute), migrationJobName(target), metav1.GetOptions{})
		require.NoError(t, err, "the migration Job of the target version")
		require.True(t, jobCondition(job, batchv1.JobComplete), "Job %s complete: %+v", job.Name, job.Status.Conditions)
		require.NotNil(t, job.Status.CompletionTime)
		done := job.Status.CompletionTime.Time
		for _, ct := range job.Spec.Template.Spec.Containers {
			assert.Contains(t, ct.Image, ":"+target, "the migration runs the target version's image")
		}
		if m != nil {
			assert.False(t, job.CreationTimestamp.Time.Before(m.FinishedAt.Truncate(time.Second)),
				"migration Job created %s, before the backup finished %s", job.CreationTimestamp, m.FinishedAt)
		}

		deps, err := cs.AppsV1().Deployments(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		rolled := newReplicaSets(t, cs, ns, target)
		require.Len(t, rolled, len(deps.Items), "every Deployment has a ReplicaSet of %s: %v", target, rolled)
		for dep, rs := range rolled {
			assert.Falsef(t, rs.CreationTimestamp.Time.Before(done),
				"Deployment %s rolled (ReplicaSet %s created %s) before the migration completed (%s)", dep, rs.Name, rs.CreationTimestamp, job.Status.CompletionTime)
		}
		old := newReplicaSets(t, cs, ns, installedVersion(t))
		assert.Len(t, old, len(deps.Items), "the previous ReplicaSets are kept: the Deployments rolled, not recreated")
	})

	t.Run("workloads ready at the new version with the changed value", func(t *testing.T) {
		requireWorkloadsReady(t, cs, ns, time.Minute)
		requireImagesAt(t, cs, ns, target)
		gw, err := cs.AppsV1().Deployments(ns).Get(ctxT(t, time.Minute), "polyaxon-gateway", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(3), *gw.Spec.Replicas, "--set gateway.replicas=3")
	})

	t.Run("status shows the backup and the upgrade, and then a failed backup", func(t *testing.T) {
		var st statusFacts
		c.deploy(t, "status", "-n", ns, "-o", "json").requireExit(t, 0).data(t, &st)
		require.NotNil(t, st.LastBackup)
		assert.True(t, st.LastBackup.Succeeded)
		assert.Equal(t, d.BackupDir, st.LastBackup.Location)
		if m != nil {
			assert.Equal(t, m.DumpSize, st.LastBackup.Bytes)
		}
		assert.Equal(t, st.LastBackup, st.LastSuccessfulBackup)
		require.NotNil(t, st.LastUpgrade)
		assert.True(t, st.LastUpgrade.Succeeded)
		assert.Equal(t, 2, st.LastUpgrade.Revision)

		// A directory no one may write: the backup fails once it has reached the database.
		failed := c.deploy(t, "backup", "-n", ns, "--backup-dir", "/proc/polyaxon-backups")
		require.NotZero(t, failed.Code, "%s", failed)
		var after statusFacts
		c.deploy(t, "status", "-n", ns, "-o", "json").requireExit(t, 0).data(t, &after)
		out := c.deploy(t, "status", "-n", ns).requireExit(t, 0)
		t.Logf("status after a failed backup:\n%s", out.Stdout)
		require.NotNil(t, after.LastBackup)
		assert.False(t, after.LastBackup.Succeeded)
		assert.Contains(t, after.LastBackup.Error, "/proc/polyaxon-backups")
		assert.Equal(t, st.LastSuccessfulBackup, after.LastSuccessfulBackup, "the last successful backup is still the upgrade's")
		assert.Contains(t, out.Stdout, "last successful backup")
	})

	t.Run("generated secrets unchanged", func(t *testing.T) {
		assert.Equal(t, secretsBefore, secretData(t, cs, ns))
	})

	t.Run("the migration wrote to the database, the data is intact", func(t *testing.T) {
		assert.Equal(t, []string{target}, appliedMigrations(t, c.pg, dbName(ns)), "the migration pod ran against the release's database")
		assert.Equal(t, seeded, c.checksums(t, ns))
	})
}

// statusFacts is the part of `status -o json`'s data that polyaxon-deploy's facts fill.
type statusFacts struct {
	LastBackup           *facts.Attempt `json:"lastBackup"`
	LastSuccessfulBackup *facts.Attempt `json:"lastSuccessfulBackup"`
	LastUpgrade          *facts.Attempt `json:"lastUpgrade"`
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
