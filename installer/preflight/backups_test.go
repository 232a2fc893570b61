package preflight_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
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

// check-scheduled-backups: skipped without backup.schedule; a failed backup to the CronJob's
// place (recorded, or a Job that failed before recording) fails it with the error, whatever
// was backed up elsewhere since; a schedule that went by without a backup fails it; none yet
// and a suspended CronJob warn; a good one passes.
func TestPostCheckScheduledBackups(t *testing.T) {
	const place = "s3://team-backups/polyaxon"
	now := time.Now().UTC().Truncate(time.Second)
	cronAt := func(created time.Time, suspend bool) *batchv1.CronJob {
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-backup", Namespace: ns, Labels: backupLabels, CreationTimestamp: metav1.NewTime(created)},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "backup", Args: []string{"backup", "--dir=" + place}}}}}}}}}
	}
	cron := cronAt(now.Add(-time.Hour), false)
	ok := (&facts.Attempt{Time: now.Add(-time.Hour), Succeeded: true, Location: place + "/polyaxon-1", Bytes: 1 << 20}).At(place)
	failed := facts.NewAttempt(errors.New("--dir s3://team-backups/polyaxon: bucket \"team-backups\" does not exist")).At(place)
	elsewhere := (&facts.Attempt{Time: now, Succeeded: true, Location: "/home/me/backups/polyaxon-2"}).At("/home/me/backups")
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
	// A backup elsewhere since (an upgrade's, a manual one) hides nothing.
	r = run(cron, factsWith(t, ok, failed, elsewhere))
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "does not exist")
	// The newest Job failed before it could record anything: the older success is no comfort.
	r = run(cron, factsWith(t, ok), backupJob("polyaxon-backup-1", now.Add(-2*time.Hour), false), backupJob("polyaxon-backup-2", now.Add(-time.Minute), true))
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "polyaxon-backup-2 failed (DeadlineExceeded")
	// A newer success after a failed Job passes.
	r = run(cron, factsWith(t, ok), backupJob("polyaxon-backup-0", now.Add(-3*time.Hour), true))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	// Three days without a backup under a daily schedule: the CronJob stopped firing.
	old := cronAt(now.Add(-96*time.Hour), false)
	stale := (&facts.Attempt{Time: now.Add(-72 * time.Hour), Succeeded: true, Location: place + "/polyaxon-0"}).At(place)
	r = run(old, factsWith(t, stale))
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "no backup to "+place+" has succeeded since")
	r = run(old)
	assert.Equal(t, check.Failed, r.Status, "never a backup in four days: %s", r.Detail)
	r = run(cronAt(now.Add(-96*time.Hour), true), factsWith(t, stale))
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "suspended")
}

// check-backup-location, against a real S3 store (versitygw): the bucket the scheduled backups
// go to is tried with the keys of their Secret before anything is installed. A missing bucket,
// refused keys, another account's bucket, a missing Secret or one without keys fail naming the
// value; a store that does not answer from here, or a workload identity, is a warning.
func TestPreCheckBackupLocation(t *testing.T) {
	store := s3test.New(t)
	ctx := context.Background()
	require.NoError(t, store.CreateUser(ctx, "team", "team-secret-key"))
	require.NoError(t, store.CreateBucket(ctx, "team-backups", "team"))
	require.NoError(t, store.CreateBucket(ctx, "platform", ""))
	keys := func(access, secret, endpoint string) *corev1.Secret {
		return edgeSecret("backup-s3", map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1"})
	}
	scheduled := func(location string, secret bool) map[string]any {
		b := map[string]any{"schedule": "0 3 * * *", "location": location, "encryptTo": []any{"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}}
		if secret {
			b["secret"] = map[string]any{"name": "backup-s3"}
		}
		return map[string]any{"backup": b}
	}
	run := func(vals map[string]any, objs ...runtime.Object) check.Result {
		return edgeCheck(t, "backup-location", vals, objs...)
	}

	r := run(map[string]any{})
	assert.Equal(t, check.Skipped, r.Status, r.Detail)
	r = run(scheduled("s3://team-backups/polyaxon", true), keys("team", "team-secret-key", store.Endpoint))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Empty(t, bucketKeys(t, store, "team-backups"), "the probe leaves nothing behind")

	for _, tc := range []struct {
		name     string
		location string
		secret   *corev1.Secret
		want     []string
	}{
		{"no such bucket", "s3://no-such-bucket/polyaxon", keys("team", "team-secret-key", store.Endpoint), []string{"backup.location s3://no-such-bucket/polyaxon", "does not exist"}},
		{"refused keys", "s3://team-backups/polyaxon", keys("team", "wrong", store.Endpoint), []string{`Secret "backup-s3"`, "refused the credentials"}},
		{"another account's bucket", "s3://platform/polyaxon", keys("team", "team-secret-key", store.Endpoint), []string{"access denied"}},
		{"no keys in the Secret", "s3://team-backups/polyaxon", edgeSecret("backup-s3", map[string]string{"AWS_REGION": "us-east-1"}), []string{"backup.secret.name", "no AWS_ACCESS_KEY_ID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(scheduled(tc.location, true), tc.secret)
			assert.Equal(t, check.Failed, r.Status, r.Detail)
			for _, w := range tc.want {
				assert.Contains(t, r.Detail, w)
			}
		})
	}
	r = run(scheduled("s3://team-backups/polyaxon", true))
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, `Secret "backup-s3" not found`)

	r = run(scheduled("s3://team-backups/polyaxon", true), keys("team", "team-secret-key", "http://polyaxon-s3.polyaxon.svc:7070"))
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "did not answer from here")
	r = run(scheduled("s3://team-backups/polyaxon", false))
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "workload identity")
}

func bucketKeys(t *testing.T, store *s3test.Store, bucket string) []string {
	out, err := store.RootClient().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}
