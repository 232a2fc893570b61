package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// The scheduled backup of the name-override scenario: a bucket of a real S3 store (versitygw, a
// process here) owned by the team's account, its keys in the Secret backup.secret.name names.
const (
	scheduledBucket = "ml-backups"
	scheduledAccess = "ml-team"
	scheduledSecret = "ml-team-secret-key"
)

// scheduledBackupValues are the values of the scenario's scheduled backups: suspended, so that
// the CronJob never starts one on its own during the test; the test runs its command.
func scheduledBackupValues(secret, recipient string) string {
	return "backup:\n  schedule: \"0 3 * * *\"\n  suspend: true\n  location: s3://" + scheduledBucket + "/ml\n  encryptTo: [" + recipient + "]\n  secret: {name: " + secret + "}\n"
}

// deployWithEnv runs the binary with more environment (the Secret's keys a pod would get).
func deployWithEnv(t *testing.T, env []string, args ...string) cmdResult {
	t.Helper()
	p := &running{args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = deployCmd(t, args, p.stdout, p.stderr)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.start = time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p.wait(t, commandTimeout)
}

// scheduledBackupRuns: the release's CronJob's own command, run with its ServiceAccount's
// rights (impersonated against the cluster's real API server and RBAC) and its Secret's keys as
// environment, keeps a sealed backup in the bucket and records it: `status` shows it and
// `check-scheduled-backups` passes. Keys the store refuses fail the backup, and `status` and
// `check` say so; the same rights cannot back up another namespace's release.
func scheduledBackupRuns(t *testing.T, c *testCluster, store *s3test.Store, ns, otherNS string) (atLastBackup map[string]string) {
	ctx := ctxT(t, 10*time.Minute)
	cs := c.Clientset
	cron, err := cs.BatchV1().CronJobs(ns).Get(ctx, overrideFullname+"-backup", metav1.GetOptions{})
	require.NoError(t, err, "backup.schedule renders the CronJob, named by fullnameOverride")
	require.True(t, *cron.Spec.Suspend)
	pod := cron.Spec.JobTemplate.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	cmd := pod.Containers[0].Args
	require.Contains(t, cmd, "--dir=s3://"+scheduledBucket+"/ml")
	as := []string{"--kubeconfig", c.KubeconfigPath, "--as", "system:serviceaccount:" + ns + ":" + pod.ServiceAccountName}
	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, pod.Containers[0].EnvFrom[0].SecretRef.Name, metav1.GetOptions{})
	require.NoError(t, err)
	var env []string
	for k, v := range secret.Data {
		env = append(env, k+"="+string(v))
	}
	status := func(t *testing.T) (last struct {
		Succeeded bool
		Error     string
		Location  string
	}) {
		var d struct {
			LastBackup *struct {
				Succeeded bool
				Error     string
				Location  string
			} `json:"lastBackup"`
		}
		c.deploy(t, "status", "-n", ns, "--release", overrideRelease, "-o", "json").requireExit(t, 0).data(t, &d)
		require.NotNil(t, d.LastBackup, "status shows the last backup")
		return *d.LastBackup
	}
	backupCheck := func(t *testing.T, code int) string {
		res := c.deploy(t, "check", "-n", ns, "--release", overrideRelease, "-o", "json").requireExit(t, code)
		return checkDetail(res.result(t), "scheduled-backups")
	}

	t.Run("the CronJob's command with its rights keeps a sealed backup in the bucket", func(t *testing.T) {
		res := deployWithEnv(t, env, append(append([]string{}, cmd...), as...)...).requireExit(t, 0)
		var d struct{ Path string }
		res.data(t, &d)
		require.True(t, strings.HasPrefix(d.Path, "s3://"+scheduledBucket+"/ml/ml-"), d.Path)
		out, err := store.RootClient().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(scheduledBucket),
			Prefix: aws.String(strings.TrimPrefix(d.Path, "s3://"+scheduledBucket+"/") + "/")})
		require.NoError(t, err)
		var names, sizes []string
		for _, o := range out.Contents {
			names = append(names, aws.ToString(o.Key)[strings.LastIndex(aws.ToString(o.Key), "/")+1:])
			sizes = append(sizes, fmt.Sprintf("%s %d", aws.ToString(o.Key), aws.ToInt64(o.Size)))
		}
		t.Logf("the scheduled backup's objects in the bucket:\n%s", strings.Join(sizes, "\n"))
		assert.Contains(t, names, "manifest.json")
		assert.Contains(t, names, "secrets.json.age")
		assert.NotContains(t, names, "secrets.json", "the release's Secrets leave the cluster sealed only")
		last := status(t)
		assert.True(t, last.Succeeded)
		assert.Equal(t, d.Path, last.Location)
		assert.Contains(t, backupCheck(t, 0), d.Path)
	})

	t.Run("its rights do not reach another namespace's release", func(t *testing.T) {
		other := make([]string, len(cmd))
		for i, a := range cmd {
			other[i] = strings.Replace(a, "--namespace="+ns, "--namespace="+otherNS, 1)
		}
		res := deployWithEnv(t, env, append(other, as...)...)
		assert.NotEqual(t, 0, res.Code, "%s", res)
		assert.Contains(t, res.Stderr, "forbidden", "%s", res)
	})

	t.Run("a backup the store refuses is a failed backup in status and check", func(t *testing.T) {
		wrong := append(append([]string{}, env...), "AWS_SECRET_ACCESS_KEY=not-the-key")
		res := deployWithEnv(t, wrong, append(append([]string{}, cmd...), as...)...)
		assert.NotEqual(t, 0, res.Code, "%s", res)
		assert.Contains(t, res.Stderr, "refused the credentials", "%s", res)
		last := status(t)
		assert.False(t, last.Succeeded)
		assert.Contains(t, last.Error, "refused the credentials")
		assert.Contains(t, backupCheck(t, 3), "refused the credentials")
		// The next good one puts the release back to healthy (the scenario's later checks).
		deployWithEnv(t, env, append(append([]string{}, cmd...), as...)...).requireExit(t, 0)
		atLastBackup = c.checksums(t, ns)
		backupCheck(t, 0)
	})
	return atLastBackup
}

// disasterRestore: the cluster is lost. A new one (a control plane of its own, an empty
// database behind its Postgres pod) gets the user's Secrets and the chart, installed as before,
// and `restore s3://.../latest` brings back every row of the bucket's last backup, the row
// counts compared by the restore itself.
func disasterRestore(t *testing.T, c *testCluster, ns string, install []string, userSecrets []string, keys []string, identity string, want map[string]string) {
	t.Run("a new cluster with the chart installed is restored from the bucket's latest backup", func(t *testing.T) {
		require.NotEmpty(t, want, "no backup in the bucket: the scheduled backup steps failed (above)")
		ctx := ctxT(t, 10*time.Minute)
		started := time.Now()
		const db = "disaster_restore"
		require.NoError(t, c.pg.CreateDatabase(ctx, db))
		target := local.TargetOf(c.pg, db)
		dc, err := createCluster("disaster", nil, local.WithClusterExec(local.PostgresPodExec(ns, overrideFullname+"-postgresql-0", target),
			local.MigrationExec(ns, target)), local.WithPodCommands())
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, dc.destroy()) })
		_, err = dc.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, name := range userSecrets { // the user's own, kept off the cluster
			s, err := c.Clientset.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			_, err = dc.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: s.Data}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		dc.deploy(t, install...).requireExit(t, 0)
		installed := time.Now()
		empty, err := pgtest.Checksums(ctx, c.pg, db)
		require.NoError(t, err)
		require.NotEqual(t, want, empty, "the new cluster starts without the old data")
		res := deployWithEnv(t, keys, "restore", "--kubeconfig", dc.KubeconfigPath, "-n", ns, "--release", overrideRelease,
			"s3://"+scheduledBucket+"/ml/latest", "--identity", identity, "--yes", "-o", "json")
		res.requireExit(t, 0)
		restored := time.Now()
		var d struct {
			Path       string
			Rows       map[string]int64
			BackupRows map[string]int64
		}
		res.data(t, &d)
		assert.True(t, strings.HasPrefix(d.Path, "s3://"+scheduledBucket+"/ml/"), d.Path)
		require.NotEmpty(t, d.BackupRows)
		assert.Equal(t, d.BackupRows, d.Rows, "every table has the row count the backup recorded")
		assert.Equal(t, want, c.checksumsOf(t, db), "every table as it was at the last backup")
		t.Logf("disaster restore: a new cluster with the chart installed in %s, restored from the bucket in %s; rows %v",
			installed.Sub(started).Round(time.Second), restored.Sub(installed).Round(time.Second), d.Rows)
	})
}
