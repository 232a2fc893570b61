package preflight_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
)

var backupLabels = map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon", "app.kubernetes.io/component": "backup"}

// factsWith is the release's facts ConfigMap after the backups given were recorded, in order.
func factsWith(t *testing.T, attempts ...*facts.Attempt) runtime.Object {
	cs := fake.NewClientset()
	s := facts.Store{Kube: cs, Namespace: ns, Release: "polyaxon"}
	for _, a := range attempts {
		require.NoError(t, s.Update(context.Background(), func(f *facts.Facts) { f.RecordBackup(a) }))
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), facts.ConfigMapName("polyaxon"), metav1.GetOptions{})
	require.NoError(t, err)
	return cm
}

func backupJob(name string, created time.Time, failed bool) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: backupLabels, CreationTimestamp: metav1.NewTime(created),
		OwnerReferences: []metav1.OwnerReference{{Kind: "CronJob", Name: "polyaxon-backup", APIVersion: "batch/v1"}}}}
	if failed {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}
	}
	return j
}

// check-scheduled-backups: skipped without backup.schedule; a failed backup (recorded, or a
// Job that failed before recording) fails it with the error; none yet warns; a good one passes.
func TestPostCheckScheduledBackups(t *testing.T) {
	cron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-backup", Namespace: ns, Labels: backupLabels},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *"}}
	now := time.Now().UTC().Truncate(time.Second)
	ok := &facts.Attempt{Time: now.Add(-time.Hour), Succeeded: true, Location: "s3://team-backups/polyaxon/polyaxon-1", Bytes: 1 << 20}
	failed := facts.NewAttempt(errors.New("--dir s3://team-backups/polyaxon: bucket \"team-backups\" does not exist"))
	run := func(objects ...runtime.Object) check.Result {
		c := healthy()
		c.objects = append(c.objects, objects...)
		rep := check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background())
		return byID(rep)["scheduled-backups"]
	}

	r := run()
	assert.Equal(t, check.Skipped, r.Status, r.Detail)
	r = run(cron)
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "has not made a backup yet")
	r = run(cron, factsWith(t, ok))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, ok.Location)
	r = run(cron, factsWith(t, ok, failed), backupJob("polyaxon-backup-2", now.Add(-time.Minute), true))
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, `bucket "team-backups" does not exist`)
	assert.Contains(t, r.Hint, "kubectl -n NAMESPACE logs job/")
	// The newest Job failed before it could record anything: the older success is no comfort.
	r = run(cron, factsWith(t, ok), backupJob("polyaxon-backup-1", now.Add(-2*time.Hour), false), backupJob("polyaxon-backup-2", now.Add(-time.Minute), true))
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "polyaxon-backup-2 failed (DeadlineExceeded")
	// A newer success after a failed Job passes.
	r = run(cron, factsWith(t, ok), backupJob("polyaxon-backup-0", now.Add(-3*time.Hour), true))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
}
