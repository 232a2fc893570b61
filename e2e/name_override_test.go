package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// releaseWithNameOverride (TestLifecycleScenarios): a release named ml, installed with nameOverride and
// fullnameOverride and a platform Secret of the user's own (secrets.existingSecret). Every
// command that acts on the release's objects finds them by the chart's names: `check` sees its
// workloads, `backup` dumps through ml-core-postgresql-0 and saves the user's Secret, the
// scheduled backup's CronJob (its command, its rights) keeps one in a bucket, a killed
// `restore` is reported by `check` and undone by `recover`, `restore` puts the data back with
// the writers down, `uninstall --purge-data` deletes the release's volumes and Secrets and
// the runs' namespace it created, and a new cluster with the chart installed on an empty
// database is restored from the bucket's latest backup.
func releaseWithNameOverride(t *testing.T) {
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsNameOverride
	seeded := c.seed(t, ns)
	ctx := ctxT(t, 20*time.Minute)

	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ml-keys", Namespace: ns},
		StringData: map[string]string{"POLYAXON_SECRET_KEY": "k-15", "POLYAXON_SECRET_INTERNAL_TOKEN": "t-15"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Scheduled backups to a bucket of a real S3 store (scheduled_backup_test.go), sealed to a
	// key made here.
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	identity := filepath.Join(t.TempDir(), "backup-key.txt")
	require.NoError(t, os.WriteFile(identity, []byte(key.String()+"\n"), 0o600))
	store := s3test.New(t)
	require.NoError(t, store.CreateUser(ctx, scheduledAccess, scheduledSecret))
	require.NoError(t, store.CreateBucket(ctx, scheduledBucket, scheduledAccess))
	s3keys := map[string]string{}
	for _, kv := range store.Env(scheduledAccess, scheduledSecret) {
		k, v, _ := strings.Cut(kv, "=")
		s3keys[k] = v
	}
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ml-backup-s3", Namespace: ns},
		StringData: s3keys}, metav1.CreateOptions{})
	require.NoError(t, err)
	vals := filepath.Join(t.TempDir(), "names.yaml")
	require.NoError(t, os.WriteFile(vals, []byte("nameOverride: platform\nfullnameOverride: "+overrideFullname+"\nsecrets:\n  existingSecret: ml-keys\n"+
		scheduledBackupValues("ml-backup-s3", key.Recipient().String())), 0o644))
	rel := []string{"-n", ns, "--release", overrideRelease}
	args := func(cmd string, more ...string) []string { return append(append([]string{cmd}, rel...), more...) }

	c.deploy(t, args("install", "--profile", "production", "-f", vals)...).requireExit(t, 0)
	sel := "app.kubernetes.io/name=platform,app.kubernetes.io/instance=" + overrideRelease
	pg, err := cs.AppsV1().StatefulSets(ns).Get(ctx, overrideFullname+"-postgresql", metav1.GetOptions{})
	require.NoError(t, err, "objects are named by fullnameOverride")
	assert.Equal(t, "platform", pg.Labels["app.kubernetes.io/name"], "and labelled by nameOverride")
	replicas := writerReplicas(t, cs, ns)
	require.NotEmpty(t, replicas)

	checkInstalled := func(t *testing.T, code int) string {
		res := c.deploy(t, args("check", "--profile", "production", "-f", vals, "-o", "json")...).requireExit(t, code)
		return checkDetail(res.result(t), "workloads-ready")
	}
	t.Run("check sees the release's workloads", func(t *testing.T) {
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		require.NoError(t, err)
		stss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		require.NoError(t, err)
		require.NotEmpty(t, deps.Items)
		assert.Contains(t, checkInstalled(t, 0), strconv.Itoa(len(deps.Items)+len(stss.Items))+" workloads ready")
	})

	backups := t.TempDir() // the scenario's: the later steps restore from it
	var backupDir string
	t.Run("backup dumps through the release's Postgres pod and saves its Secrets and the user's", func(t *testing.T) {
		res := c.deploy(t, args("backup", "--dir", backups, "-o", "json")...).requireExit(t, 0)
		var d struct {
			backup.Manifest
			Path     string `json:"path"`
			Verified bool   `json:"verified"`
		}
		res.data(t, &d)
		require.NotEmpty(t, d.Path, "%s", res)
		backupDir = d.Path
		assert.True(t, d.Verified)
		assert.Equal(t, dbName(ns), d.Database, "dumped through %s-postgresql-0", overrideFullname)
		assert.Equal(t, backup.SourceInCluster, d.Source)
		assert.Contains(t, d.SecretNames, overrideFullname+"-postgresql")
		assert.Contains(t, d.SecretNames, "ml-keys", "secrets.existingSecret is saved with the dump")
	})

	atLastBackup := scheduledBackupRuns(t, c, store, ns, "kube-system")

	t.Run("a killed restore is reported by check and undone by recover", func(t *testing.T) {
		require.NotEmpty(t, backupDir, "no backup to restore: the backup step failed (above)")
		p := c.startDeploy(t, args("restore", backupDir, "--yes")...)
		gateway := overrideFullname + "-gateway"
		deadline := time.Now().Add(2 * time.Minute)
		for {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, gateway, metav1.GetOptions{})
			require.NoError(t, err)
			if _, ok := backup.RecordedReplicas(d); ok {
				break
			}
			require.True(t, time.Now().Before(deadline), "the restore never scaled %s down", gateway)
			time.Sleep(20 * time.Millisecond)
		}
		p.signal(t, syscall.SIGKILL)
		p.wait(t, time.Minute)
		left := writerReplicas(t, cs, ns)
		require.Zero(t, left[gateway], "the killed restore left %s scaled down", gateway)

		assert.Contains(t, checkInstalled(t, 3), "Deployment "+gateway+": 0/"+strconv.Itoa(int(replicas[gateway]))+" replicas, scaled down from")

		res := c.deploy(t, args("recover", "--yes", "-o", "json")...).requireExit(t, 0)
		var d struct {
			Action     string   `json:"action"`
			ScaledBack []string `json:"scaledBack"`
		}
		res.data(t, &d)
		assert.Equal(t, "scaled-back", d.Action)
		assert.Contains(t, d.ScaledBack, gateway+": "+strconv.Itoa(int(replicas[gateway])))
		assert.Equal(t, replicas, writerReplicas(t, cs, ns), "every writer back to its replicas")
		requireWorkloadsReady(t, cs, ns, 2*time.Minute)
		checkInstalled(t, 0)
	})

	t.Run("restore puts the data back with the release's writers down", func(t *testing.T) {
		require.NotEmpty(t, backupDir, "no backup to restore: the backup step failed (above)")
		seen := watchReplicas(t, cs, ns)
		c.deploy(t, args("restore", backupDir, "--yes")...).requireExit(t, 0)
		history := seen()
		for dep, n := range replicas {
			h := history[dep]
			if assert.NotEmpty(t, h, dep) {
				assert.Equalf(t, n, h[len(h)-1], "Deployment %s back to %d replicas (seen: %v)", dep, n, h)
			}
		}
		assert.Contains(t, history[overrideFullname+"-gateway"], int32(0), "the gateway was down during the restore")
		assert.Equal(t, seeded, c.checksums(t, ns), "every table as the backup recorded it")
	})

	t.Run("uninstall --purge-data deletes the release's volumes, Secrets and runs namespace", func(t *testing.T) {
		pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		require.NoError(t, err)
		require.NotEmpty(t, pvcs.Items, "the release has volumes")
		var want []string
		for _, p := range pvcs.Items {
			want = append(want, p.Name)
		}
		res := c.deploy(t, args("uninstall", "--purge-data", "--yes", "-o", "json")...).requireExit(t, 0)
		var d struct {
			PurgedVolumes    []string `json:"purgedVolumes"`
			PurgedSecrets    []string `json:"purgedSecrets"`
			PurgedNamespaces []string `json:"purgedNamespaces"`
		}
		res.data(t, &d)
		assert.ElementsMatch(t, want, d.PurgedVolumes)
		assert.Equal(t, []string{runsNamespaceOf(ns)}, d.PurgedNamespaces, "the runs' namespace the release created goes with the data")
		assert.Contains(t, d.PurgedSecrets, overrideFullname+"-postgresql")
		assert.NotContains(t, d.PurgedSecrets, "ml-keys", "the user's own Secret is theirs")
		waitFor(t, time.Minute, "the release's volumes gone", func(ctx context.Context) (bool, string, error) {
			left, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(left.Items) == 0, strconv.Itoa(len(left.Items)) + " left", nil
		})
		_, err = cs.CoreV1().Secrets(ns).Get(ctx, "ml-keys", metav1.GetOptions{})
		assert.NoError(t, err, "the user's Secret stays")
		waitFor(t, 2*time.Minute, "namespace "+runsNamespaceOf(ns)+" gone", func(ctx context.Context) (bool, string, error) {
			n, err := cs.CoreV1().Namespaces().Get(ctx, runsNamespaceOf(ns), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return false, string(n.Status.Phase), nil
		})
	})

	disasterRestore(t, c, ns, args("install", "--profile", "production", "-f", vals), []string{"ml-keys", "ml-backup-s3"},
		store.Env(scheduledAccess, scheduledSecret), identity, atLastBackup)
}
