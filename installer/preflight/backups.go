package preflight

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	cronlib "github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
)

// scheduledBackupsFix is the hint of check-scheduled-backups.
const scheduledBackupsFix = "kubectl -n NAMESPACE logs job/JOB shows the failed backup's messages; fix what they name (the bucket, its credentials in backup.secret.name, the encryption keys), then run one now: kubectl -n NAMESPACE create job --from=cronjob/CRONJOB backup-now"

// checkScheduledBackups fails when the release's scheduled backup (backup.schedule) last
// failed: the backup recorded its failure in the release's facts (under the place the CronJob
// sends backups to, so a backup taken elsewhere hides nothing), or its Job failed before it
// could (an image that does not pull, a pod that never ran, a deadline); and when no backup
// succeeded by the time the schedule wanted the next one (a CronJob that stopped firing).
func (e *Env) checkScheduledBackups(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	rel, err := backup.LoadRelease(ctx, cs, e.Namespace, e.Release)
	if err != nil {
		return "", check.Skip("no deployed release: " + err.Error())
	}
	sel := metav1.ListOptions{LabelSelector: rel.Names.ComponentSelector("backup")}
	crons, err := cs.BatchV1().CronJobs(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing CronJobs: %w", err)
	}
	if len(crons.Items) == 0 {
		return "", check.Skip("no scheduled backups (backup.schedule is empty)")
	}
	cron := crons.Items[0]
	place := cronPlace(&cron)
	f, _, err := facts.Store{Kube: cs, Namespace: e.Namespace, Release: e.Release}.Read(ctx)
	if err != nil {
		return "", err
	}
	rec := f.BackupsByPlace[place]
	jobs, err := cs.BatchV1().Jobs(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing Jobs: %w", err)
	}
	if job := newestJobOf(jobs.Items, cron.Name); job != nil {
		if c := jobCondition(job, batchv1.JobFailed); c != nil && !recordedAfter(rec, job) {
			return "", fmt.Errorf("the newest backup Job %s failed (%s: %s) before it recorded its outcome", job.Name, c.Reason, c.Message)
		}
	}
	if rec != nil && !rec.Succeeded {
		return "", fmt.Errorf("the last backup to %s, at %s, failed: %s (CronJob %s)", place, rec.Time.Format(time.RFC3339), rec.Error, cron.Name)
	}
	var last time.Time
	if rec != nil {
		last = rec.Time
	}
	if t := cron.Status.LastSuccessfulTime; t != nil && t.After(last) {
		last = t.Time
	}
	where := place
	if rec != nil && rec.Succeeded && rec.Location != "" {
		where = rec.Location
	}
	if cron.Spec.Suspend != nil && *cron.Spec.Suspend {
		return "", check.Warnf("CronJob %s is suspended (backup.suspend): it takes no backup%s", cron.Name, since(last, where))
	}
	due, err := nextDue(&cron, cmp.Or(last, cron.CreationTimestamp.Time))
	if err != nil {
		return "", err
	}
	if time.Now().After(due) {
		return "", fmt.Errorf("no backup to %s has succeeded since %s: the schedule %q wanted one by %s (is the CronJob %s running its Jobs?)",
			place, cmp.Or(last, cron.CreationTimestamp.Time).Format(time.RFC3339), cron.Spec.Schedule, due.Format(time.RFC3339), cron.Name)
	}
	if last.IsZero() {
		return "", check.Warnf("CronJob %s (schedule %q) has not made a backup yet", cron.Name, cron.Spec.Schedule)
	}
	return fmt.Sprintf("CronJob %s (schedule %q); last backup %s, %s", cron.Name, cron.Spec.Schedule, last.Format(time.RFC3339), where), nil
}

// cronPlace is where the CronJob sends backups: its backup's --dir.
func cronPlace(cron *batchv1.CronJob) string {
	for _, c := range cron.Spec.JobTemplate.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--dir="); ok {
				return v
			}
		}
	}
	return ""
}

// nextDue is when the backup after one that succeeded at last should have ended: the
// schedule's next time after it, plus the Job's time limit and a margin for the Job to start.
func nextDue(cron *batchv1.CronJob, last time.Time) (time.Time, error) {
	spec := cron.Spec.Schedule
	if tz := cron.Spec.TimeZone; tz != nil && *tz != "" && !strings.HasPrefix(spec, "@") {
		spec = "CRON_TZ=" + *tz + " " + spec
	}
	sched, err := cronlib.ParseStandard(spec)
	if err != nil {
		return time.Time{}, fmt.Errorf("CronJob %s: schedule %q: %w", cron.Name, cron.Spec.Schedule, err)
	}
	limit := time.Hour
	if d := cron.Spec.JobTemplate.Spec.ActiveDeadlineSeconds; d != nil {
		limit = time.Duration(*d) * time.Second
	}
	return sched.Next(last).Add(limit + 15*time.Minute), nil
}

func since(t time.Time, where string) string {
	if t.IsZero() {
		return ""
	}
	return "; the last succeeded at " + t.Format(time.RFC3339) + ", " + where
}

// newestJobOf is the newest Job the CronJob named made.
func newestJobOf(jobs []batchv1.Job, cron string) *batchv1.Job {
	var mine []batchv1.Job
	for _, j := range jobs {
		for _, o := range j.OwnerReferences {
			if o.Kind == "CronJob" && o.Name == cron {
				mine = append(mine, j)
			}
		}
	}
	if len(mine) == 0 {
		return nil
	}
	sort.Slice(mine, func(i, k int) bool { return mine[i].CreationTimestamp.After(mine[k].CreationTimestamp.Time) })
	return &mine[0]
}

// recordedAfter says whether the backup recorded in the facts was taken after job started (so
// the job's failure is the one recorded, or a newer backup succeeded).
func recordedAfter(b *facts.Attempt, job *batchv1.Job) bool {
	return b != nil && !b.Time.Before(job.CreationTimestamp.Truncate(time.Second))
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// backupLocationFix is the hint of check-backup-location.
const backupLocationFix = "create the bucket, or fix backup.location; put keys the store accepts in the Secret backup.secret.name names (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for an S3-compatible store), with the right to write under the prefix"

// checkBackupLocation tries the bucket the scheduled backups go to, with the keys of the Secret
// the CronJob reads, before anything is installed: a bucket that is not there, keys the store
// refuses or a prefix they may not write fail here, naming the value, rather than at the first
// backup. A store this machine cannot reach (an endpoint inside the cluster), or a workload
// identity instead of keys, is left to the first backup: a warning says so.
func (e *Env) checkBackupLocation(ctx context.Context) (string, error) {
	cron := e.backupCronJob()
	if cron == nil {
		return "", check.Skip("no scheduled backups (backup.schedule is empty)")
	}
	c := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	var where string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--dir="); ok {
			where = v
		}
	}
	if !bucket.IsLocation(where) {
		return "", check.Skip("the backups go to a claim (backup.persistence.existingClaim)")
	}
	loc, err := bucket.ParseLocation(where)
	if err != nil {
		return "", fmt.Errorf("backup.location: %w", err)
	}
	if len(c.EnvFrom) == 0 || c.EnvFrom[0].SecretRef == nil {
		return "", check.Warnf("backup.location %s is reached with the ServiceAccount's workload identity, which this machine does not have: the first backup tells whether it works", where)
	}
	name := c.EnvFrom[0].SecretRef.Name
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	s, err := cs.CoreV1().Secrets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if isNotFound(err) {
		return "", fmt.Errorf("backup.secret.name: Secret %q not found in namespace %q: every backup would fail", name, e.Namespace)
	}
	if err != nil {
		return "", fmt.Errorf("reading Secret %s/%s: %w", e.Namespace, name, err)
	}
	answer, err := tryWithSecretKeys(ctx, s, loc)
	switch {
	case err != nil:
		return "", err
	case answer.noKeys:
		return "", fmt.Errorf("backup.secret.name: Secret %q has no AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY (it has %s): every backup would fail", name, secretKeys(s))
	case answer.refused != nil:
		return "", fmt.Errorf("backup.location %s with the keys of Secret %q: %w", where, name, answer.refused)
	case answer.unreachable != nil:
		return "", check.Warnf("backup.location %s: the store did not answer from here (%v): the first backup tells whether it works", where, answer.unreachable)
	}
	return fmt.Sprintf("%s is writable with the keys of Secret %s", where, name), nil
}

// backupCronJob is the rendered backup CronJob, nil without backup.schedule.
func (e *Env) backupCronJob() *batchv1.CronJob {
	for _, o := range e.objects() {
		var cj batchv1.CronJob
		if asTyped(o, "CronJob", &cj) && cj.Labels["app.kubernetes.io/component"] == "backup" && len(cj.Spec.JobTemplate.Spec.Template.Spec.Containers) > 0 {
			return &cj
		}
	}
	return nil
}

// secretKeysAnswer is how a bucket answered a client holding a Secret's keys alone.
type secretKeysAnswer struct {
	noKeys      bool  // the Secret has no AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY
	refused     error // the store refused the keys, or has no such bucket
	unreachable error // the store did not answer from here
}

// tryWithSecretKeys writes to loc and deletes what it wrote, with the environment of a pod
// that loads Secret s (envFrom) and nothing of this machine's.
func tryWithSecretKeys(ctx context.Context, s *corev1.Secret, loc bucket.Location) (secretKeysAnswer, error) {
	env := map[string]string{}
	for k, v := range s.Data {
		env[k] = string(v)
	}
	if env["AWS_ACCESS_KEY_ID"] == "" || env["AWS_SECRET_ACCESS_KEY"] == "" {
		return secretKeysAnswer{noKeys: true}, nil
	}
	store, err := bucket.Open(ctx, bucket.WithEnvironmentOnly(env))
	if err != nil {
		return secretKeysAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := store.CheckWritable(ctx, loc); err != nil {
		if bucket.IsRefusal(err) {
			return secretKeysAnswer{refused: err}, nil
		}
		return secretKeysAnswer{unreachable: err}, nil
	}
	return secretKeysAnswer{}, nil
}
