package preflight

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
)

// scheduledBackupsFix is the hint of check-scheduled-backups.
const scheduledBackupsFix = "kubectl -n NAMESPACE logs job/JOB shows the failed backup's messages; fix what they name (the bucket, its credentials in backup.secret.name, the encryption keys), then run one now: kubectl -n NAMESPACE create job --from=cronjob/CRONJOB backup-now"

// checkScheduledBackups fails when the release's scheduled backup (backup.schedule) last
// failed: the backup recorded its failure in the release's facts, or its Job failed before it
// could (an image that does not pull, a pod that never ran, a deadline).
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
	f, _, err := facts.Store{Kube: cs, Namespace: e.Namespace, Release: e.Release}.Read(ctx)
	if err != nil {
		return "", err
	}
	if b := f.LastBackup; b != nil && !b.Succeeded {
		return "", fmt.Errorf("the last backup, at %s, failed: %s (CronJob %s)", b.Time.Format(time.RFC3339), b.Error, cron.Name)
	}
	jobs, err := cs.BatchV1().Jobs(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing Jobs: %w", err)
	}
	if job := newestJobOf(jobs.Items, cron.Name); job != nil {
		if c := jobCondition(job, batchv1.JobFailed); c != nil && !recordedAfter(f.LastBackup, job) {
			return "", fmt.Errorf("the newest backup Job %s failed (%s: %s) before it recorded its outcome", job.Name, c.Reason, c.Message)
		}
	}
	last := f.LastSuccessfulBackup
	if last == nil {
		return "", check.Warnf("CronJob %s (schedule %q) has not made a backup yet", cron.Name, cron.Spec.Schedule)
	}
	return fmt.Sprintf("CronJob %s (schedule %q); last backup %s, %s", cron.Name, cron.Spec.Schedule, last.Time.Format(time.RFC3339), last.Location), nil
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
