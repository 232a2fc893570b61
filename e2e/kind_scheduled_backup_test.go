package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// kindBackupClaim holds the kind scenario's scheduled backups.
const kindBackupClaim = "polyaxon-backups"

// kindScheduledBackupSets turn on the chart's scheduled backups in the kind scenario, onto a
// claim (the bucket's path is TestLifecycleScenarios's), suspended: the test starts the one
// backup it checks. The claim is made first.
func kindScheduledBackupSets(t *testing.T, c *cluster.Cluster, ns string) []string {
	t.Helper()
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	ctx := ctxT(t, time.Minute)
	_, err = c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		require.NoError(t, err)
	}
	_, err = c.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: kindBackupClaim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return []string{"--set", "backup.schedule=0 3 * * *", "--set", "backup.suspend=true",
		"--set", "backup.encryptTo[0]=" + key.Recipient().String(), "--set", "backup.persistence.existingClaim=" + kindBackupClaim}
}

// kindScheduledBackup: a Job made from the release's backup CronJob (kubectl create job
// --from=cronjob/...) runs polyaxon-deploy's image on the core node under the restricted Pod
// Security level, with its own ServiceAccount's rights and the platform's NetworkPolicies, and
// keeps a sealed backup on its claim; status shows it and check-scheduled-backups passes.
func kindScheduledBackup(t *testing.T, c *cluster.Cluster, ns string) {
	ctx := ctxT(t, 10*time.Minute)
	cs := c.Clientset
	cron, err := cs.BatchV1().CronJobs(ns).Get(ctx, releaseName+"-backup", metav1.GetOptions{})
	require.NoError(t, err)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-now", Namespace: ns, Labels: cron.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cron.Name, UID: cron.UID}}},
		Spec: cron.Spec.JobTemplate.Spec,
	}
	if job.Labels == nil {
		job.Labels = cron.Labels
	}
	start := time.Now()
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, 8*time.Minute, "the backup Job to end", func(ctx context.Context) (bool, string, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("active %d, failed %d", j.Status.Active, j.Status.Failed), nil
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	pod := pods.Items[0]
	logs, _ := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase, "the backup pod's log:\n%s", logs)
	t.Logf("scheduled backup Job on %s: %s; its last lines: %s", pod.Spec.NodeName, time.Since(start).Round(time.Second), lastLines(string(logs), 3))
	assert.Equal(t, cluster.PoolCore, nodePools(t, cs)[pod.Spec.NodeName], "on the core node")

	var d struct {
		LastBackup *struct {
			Succeeded bool
			Location  string
			Bytes     int64
		} `json:"lastBackup"`
	}
	deploy(t, "status", "--kubeconfig", c.KubeconfigPath, "-n", ns, "-o", "json").requireExit(t, 0).data(t, &d)
	require.NotNil(t, d.LastBackup)
	assert.True(t, d.LastBackup.Succeeded)
	assert.True(t, strings.HasPrefix(d.LastBackup.Location, "/backups/"+releaseName+"-"), d.LastBackup.Location)
	assert.Positive(t, d.LastBackup.Bytes)
	res := deploy(t, "check", "--kubeconfig", c.KubeconfigPath, "-n", ns, "-o", "json").requireExit(t, 0)
	assert.Contains(t, checkDetail(res.result(t), "scheduled-backups"), d.LastBackup.Location)
}
