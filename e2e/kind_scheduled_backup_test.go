package e2e

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
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

// kindScheduledBackupToABucket: the S3 store runs on kind (its image, built here, on the core
// node under the restricted Pod Security level), and a Job of the release's backup CronJob,
// aimed at a bucket of it with keys in a Secret (what backup.location and backup.secret.name
// render), keeps a sealed backup there: its manifest, its sealed dump and Secrets, and no
// plain secrets.json. The objects are listed with the store's own S3 API. It returns the
// store, which the upgrade then makes the artifacts store.
func kindScheduledBackupToABucket(t *testing.T, c *cluster.Cluster, ns, storeImage string) *s3store.Store {
	ctx := ctxT(t, 10*time.Minute)
	cs := c.Clientset
	const storeNS, bucket, access, secret = "s3", "ml-backups", "KINDBACKUPS000000001", "kind-backups-secret-0123456789abcdef01234"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	st, err := s3store.Deploy(ctx, c, s3store.Options{Namespace: storeNS, Image: storeImage, NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}})
	require.NoError(t, err)
	t.Logf("the S3 store (%s) ready on kind in %s", storeImage, time.Since(start).Round(time.Second))
	store, err := st.Connect(ctx, func(_ context.Context, namespace, service string, port int32) (string, error) {
		return strings.TrimPrefix(kindPortForward(t, c, namespace, "svc/"+service, int(port)), "http://"), nil
	})
	require.NoError(t, err)
	require.NoError(t, store.CreateUser(ctx, access, secret))
	require.NoError(t, store.CreateBucket(ctx, bucket, access))
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-s3"}, StringData: map[string]string{
		"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": st.Endpoint, "AWS_REGION": s3test.Region,
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The CronJob's Job, as backup.location=s3://ml-backups/kind and backup.secret.name would
	// render it: the place in --dir, the keys from the Secret, no claim.
	cron, err := cs.BatchV1().CronJobs(ns).Get(ctx, releaseName+"-backup", metav1.GetOptions{})
	require.NoError(t, err)
	spec := *cron.Spec.JobTemplate.Spec.DeepCopy()
	pod := &spec.Template.Spec
	ctr := &pod.Containers[0]
	for i, a := range ctr.Args {
		if strings.HasPrefix(a, "--dir=") {
			ctr.Args[i] = "--dir=s3://" + bucket + "/kind"
		}
	}
	ctr.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "backup-s3"}}}}
	ctr.VolumeMounts = slices.DeleteFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "backups" })
	pod.Volumes = slices.DeleteFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "backups" })
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "backup-to-bucket", Namespace: ns, Labels: cron.Spec.JobTemplate.Labels}, Spec: spec}
	start = time.Now()
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	var logs []byte
	waitFor(t, 8*time.Minute, "the backup Job to the bucket to end", func(ctx context.Context) (bool, string, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprint("no pod yet ", err), nil
		}
		p := pods.Items[0]
		logs, _ = cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, string(p.Status.Phase), nil
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	require.Equal(t, corev1.PodSucceeded, pods.Items[0].Status.Phase, "the backup pod's log:\n%s", logs)
	t.Logf("a Job of the backup CronJob sent a sealed backup to s3://%s/kind in %s", bucket, time.Since(start).Round(time.Second))

	keys := listKeys(t, ctx, store.Client(access, secret), bucket, "kind/")
	t.Logf("the bucket: %s", strings.Join(keys, ", "))
	var manifest, dump, sealedSecrets bool
	for _, k := range keys {
		manifest = manifest || strings.HasSuffix(k, "/manifest.json")
		dump = dump || (strings.HasSuffix(k, ".age") && !strings.HasSuffix(k, "/secrets.json.age"))
		sealedSecrets = sealedSecrets || strings.HasSuffix(k, "/secrets.json.age")
		assert.Falsef(t, strings.HasSuffix(k, "/secrets.json"), "%s: the release's Secrets in plain text", k)
	}
	assert.True(t, manifest && dump && sealedSecrets, "a manifest, a sealed dump and sealed Secrets: %v", keys)
	return st
}
