package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// migrationDamageAndRestore (TestLifecycleScenarios): a migration that alters a table and deletes rows, then
// fails, really damages the data (so the scenarios' "data intact" checks can fail); the
// upgrade stops at the previous revision and names the backup to restore. `polyaxon-deploy
// restore DIR --yes` puts the data back, with the release's database writers scaled to zero
// during the restore and back afterwards. The same broken upgrade with --restore-on-failure
// restores by itself: the checksums are back to their values before the upgrade.
func migrationDamageAndRestore(t *testing.T) {
	target := nextVersion(t, 1)
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsRestore
	seeded := c.seed(t, ns)
	c.deploy(t, "install", "-n", ns, "--profile", "production").requireExit(t, 0)
	replicas := writerReplicas(t, cs, ns)
	require.NotEmpty(t, replicas)
	chart := bumpedChart(t, target)
	broken := migrationValues(t, destructiveFailingMigration)
	backups := t.TempDir()

	var backupDir string
	t.Run("the failed migration's damage stays and the error names the backup", func(t *testing.T) {
		res := c.deploy(t, "upgrade", "-n", ns, "--chart", chart, "-f", broken, "--backup-dir", backups, "-o", "json").requireExit(t, 1)
		var d upgradeData
		res.data(t, &d)
		require.NotEmpty(t, d.BackupDir, "the backup taken before the migration\n%s", res)
		assert.Equal(t, backups, filepath.Dir(d.BackupDir))
		backupDir = d.BackupDir
		assert.Contains(t, res.Stderr, "restore it with `polyaxon-deploy restore "+d.BackupDir+"`")
		assert.NotContains(t, res.Stderr, "database restored from")

		damaged := c.checksums(t, ns)
		assert.NotEqual(t, seeded, damaged, "the migration pod wrote to the database")
		assert.True(t, strings.HasPrefix(damaged["metrics"], "0:"), "metrics emptied by the migration: %s", damaged["metrics"])
		assert.NotEqual(t, seeded["runs"], damaged["runs"], "runs altered by the migration")
		assert.Equal(t, map[int]string{1: "deployed"}, helmRevisions(t, cs, ns), "no Helm revision was created")
		requireImagesAt(t, cs, ns, installedVersion(t))
	})

	t.Run("restore DIR --yes puts the data back, the writers scaled to zero and back", func(t *testing.T) {
		require.NotEmpty(t, backupDir)
		seen := watchReplicas(t, cs, ns)
		c.deploy(t, "restore", backupDir, "--yes", "-n", ns).requireExit(t, 0)
		history := seen()
		for dep, n := range replicas {
			h := history[dep]
			assert.Containsf(t, h, int32(0), "Deployment %s was scaled to zero during the restore (replicas seen: %v)", dep, h)
			if assert.NotEmpty(t, h, dep) {
				assert.Equalf(t, n, h[len(h)-1], "Deployment %s back to %d replicas (seen: %v)", dep, n, h)
			}
		}
		assert.Equal(t, seeded, c.checksums(t, ns), "every table as the backup recorded it")
		requireWorkloadsReady(t, cs, ns, 2*time.Minute)
	})

	t.Run("--restore-on-failure restores the data itself", func(t *testing.T) {
		res := c.deploy(t, "upgrade", "-n", ns, "--chart", chart, "-f", broken, "--backup-dir", backups, "--restore-on-failure").requireExit(t, 1)
		assert.Contains(t, res.Stderr, "database restored from "+backups)
		assert.Equal(t, seeded, c.checksums(t, ns), "the checksums are back to their values before the upgrade")
		assert.Equal(t, map[int]string{1: "deployed"}, helmRevisions(t, cs, ns))
		requireImagesAt(t, cs, ns, installedVersion(t))
		requireWorkloadsReady(t, cs, ns, 2*time.Minute)
		assert.Equal(t, writerReplicas(t, cs, ns), replicas, "the writers are back")
	})
}

// writerReplicas maps each Deployment of ns to its replicas.
func writerReplicas(t *testing.T, cs kubernetes.Interface, ns string) map[string]int32 {
	t.Helper()
	list, err := cs.AppsV1().Deployments(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int32{}
	for _, d := range list.Items {
		out[d.Name] = replicasOf(&d)
	}
	return out
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// watchReplicas records every change of each Deployment's replicas in ns from now on (a watch:
// every update, however short); the returned func stops and returns the sequences.
func watchReplicas(t *testing.T, cs kubernetes.Interface, ns string) func() map[string][]int32 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string][]int32{}
	lastRV := map[string]string{} // the newest version of each Deployment the watch delivered
	add := func(d *appsv1.Deployment) {
		mu.Lock()
		defer mu.Unlock()
		lastRV[d.Name] = d.ResourceVersion
		h := seen[d.Name]
		if n := replicasOf(d); len(h) == 0 || h[len(h)-1] != n {
			seen[d.Name] = append(h, n)
		}
	}
	for i := range list.Items {
		add(&list.Items[i])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				add(d)
			}
		}
	}()
	// caughtUp: the watch has delivered every Deployment as it is now. The command returns as
	// soon as its last scale is accepted, which may be before the watch event arrives.
	caughtUp := func(ctx context.Context) (bool, string, error) {
		now, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		mu.Lock()
		defer mu.Unlock()
		for _, d := range now.Items {
			if lastRV[d.Name] != d.ResourceVersion {
				return false, "watch behind on " + d.Name, nil
			}
		}
		return true, "", nil
	}
	stop := func() map[string][]int32 {
		waitFor(t, 30*time.Second, "the replicas watch caught up", caughtUp)
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	t.Cleanup(func() { cancel(); w.Stop() })
	return stop
}
