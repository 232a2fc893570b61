package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const freezeQuota = "e2e-freeze-rollouts"

// interruptedUpgrade (TestLifecycleScenarios): an upgrade whose rollout cannot progress (a ResourceQuota
// forbids new ReplicaSets, a cluster condition, not an input) is waiting on its workloads when
// it receives SIGINT: the release is not left pending-*, and once the condition is gone the
// same command succeeds. Then an upgrade killed with SIGKILL does leave the release
// pending-upgrade; `recover --yes` marks it failed and rolls back to the last good revision.
func interruptedUpgrade(t *testing.T) {
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsInterrupted
	seeded := c.seed(t, ns)
	backups := t.TempDir()

	c.deploy(t, "install", "-n", ns, "--profile", "production").requireExit(t, 0)

	upgradeTo := func(v string) []string {
		return []string{"upgrade", "-n", ns, "--chart", bumpedChart(t, v), "--backup-dir", backups, "--timeout", "3m"}
	}

	ok := t.Run("SIGINT while waiting leaves no pending release; a rerun succeeds", func(t *testing.T) {
		target := nextVersion(t, 1)
		args := upgradeTo(target)
		freezeRollouts(t, c, ns)
		p := c.startDeploy(t, args...)
		waitUpgradeWaiting(t, c, ns, target, p)

		p.signal(t, syscall.SIGINT)
		res := p.wait(t, 2*time.Minute)
		assert.NotEqualf(t, 0, res.Code, "an interrupted upgrade does not exit 0\n%s", res)
		assert.Containsf(t, strings.ToLower(res.Stderr), "interrupt", "says it was interrupted\n%s", res)

		revs := requireNotPending(t, cs, ns)
		assert.Equal(t, "failed", revs[2], "the interrupted revision is recorded failed: %v", revs)
		assert.Contains(t, mapValues(revs), "deployed", "a good revision remains: %v", revs)
		st := c.statusOf(t, ns)
		assert.NotContains(t, st.Status, "pending")

		unfreezeRollouts(t, c, ns)
		c.deploy(t, args...).requireExit(t, 0)
		revs = requireNotPending(t, cs, ns)
		assert.Equal(t, "deployed", revs[newest(revs)], "the rerun's revision: %v", revs)
		st = c.statusOf(t, ns)
		assert.Equal(t, target, st.AppVersion)
		requireWorkloadsReady(t, cs, ns, time.Minute)
		requireImagesAt(t, cs, ns, target)
	})
	require.True(t, ok, "the recover part needs the release of the first part")

	t.Run("recover a release left pending-upgrade by a killed run", func(t *testing.T) {
		good, target := nextVersion(t, 1), nextVersion(t, 2)
		before := newest(helmRevisions(t, cs, ns))
		pending := before + 1
		freezeRollouts(t, c, ns)
		p := c.startDeploy(t, upgradeTo(target)...)
		waitUpgradeWaiting(t, c, ns, target, p)
		p.signal(t, syscall.SIGKILL)
		p.wait(t, time.Minute)

		revs := helmRevisions(t, cs, ns)
		require.Equal(t, "pending-upgrade", revs[pending], "a killed run leaves its revision pending (the premise): %v", revs)
		st := c.statusOf(t, ns)
		assert.Equal(t, "pending-upgrade", st.Status)
		unfreezeRollouts(t, c, ns)

		// Nothing runs on a pending release: the release-state check says what to do.
		res := c.deploy(t, append(upgradeTo(target), "-o", "json")...).requireExit(t, 3)
		assert.Contains(t, failedChecks(res.result(t)), "release-state")
		assert.Contains(t, res.Stderr, "recover")

		// recover asks first; without a terminal it refuses and changes nothing.
		res = c.deploy(t, "recover", "-n", ns).requireExit(t, 2)
		assert.Contains(t, res.Stderr, "--yes", "without a terminal recover asks for --yes")
		assert.Equal(t, "pending-upgrade", helmRevisions(t, cs, ns)[pending])

		res = c.deploy(t, "recover", "-n", ns, "--yes", "-o", "json").requireExit(t, 0)
		assert.Less(t, res.Took, 45*time.Second, "the killed run's lock must not block recover until its lease expires")
		revs = requireNotPending(t, cs, ns)
		assert.Equal(t, "failed", revs[pending], "the pending revision is marked failed")
		assert.Equal(t, "deployed", revs[newest(revs)], "%v", revs)
		assert.Greater(t, newest(revs), pending, "the rollback is a new revision")
		st = c.statusOf(t, ns)
		assert.Equal(t, "deployed", st.Status)
		assert.Equal(t, good, st.AppVersion, "rolled back to the last good revision")
		requireWorkloadsReady(t, cs, ns, 2*time.Minute)
		requireImagesAt(t, cs, ns, good)
	})

	t.Run("data intact", func(t *testing.T) {
		assert.Equal(t, seeded, c.checksums(t, ns))
	})
}

// freezeRollouts caps the namespace's ReplicaSets at their current number: a Deployment whose
// template changes cannot create its new ReplicaSet, so the rollout waits forever, while
// server-side dry-runs, Jobs and the existing pods are unaffected.
func freezeRollouts(t *testing.T, c *testCluster, ns string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	rss, err := c.Clientset.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	n := resource.MustParse(fmt.Sprint(len(rss.Items)))
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: freezeQuota},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/replicasets.apps": n}},
	}
	_, err = c.Clientset.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { unfreezeRollouts(t, c, ns) })
	// Admission enforces a quota only once the quota controller has computed its usage.
	waitFor(t, time.Minute, "quota "+freezeQuota+" in force", func(ctx context.Context) (bool, string, error) {
		q, err := c.Clientset.CoreV1().ResourceQuotas(ns).Get(ctx, freezeQuota, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		used, ok := q.Status.Used["count/replicasets.apps"]
		return ok && used.Cmp(n) == 0, fmt.Sprintf("status %+v", q.Status), nil
	})
}

func unfreezeRollouts(t *testing.T, c *testCluster, ns string) {
	err := c.Clientset.CoreV1().ResourceQuotas(ns).Delete(context.Background(), freezeQuota, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete quota %s: %v", freezeQuota, err)
	}
}

// waitUpgradeWaiting waits until the upgrade run p has a pending-upgrade revision and has
// applied the new gateway template: Helm is now waiting on the rollout.
func waitUpgradeWaiting(t *testing.T, c *testCluster, ns, target string, p *running) {
	t.Helper()
	waitFor(t, 2*time.Minute, "the upgrade to wait on its rollout", func(ctx context.Context) (bool, string, error) {
		select {
		case <-p.done:
			return false, "", fmt.Errorf("the upgrade ended before it waited\n%s", p.result())
		default:
		}
		list, err := c.Clientset.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + releaseName + ",status=pending-upgrade"})
		if err != nil || len(list.Items) == 0 {
			return false, "no pending-upgrade revision yet", nil
		}
		gw, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "polyaxon-gateway", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		img := gw.Spec.Template.Spec.Containers[0].Image
		return strings.HasSuffix(img, ":"+target), "gateway template still at " + img, nil
	})
}

// newest is the highest revision number.
func newest(revs map[int]string) int {
	n := 0
	for v := range revs {
		n = max(n, v)
	}
	return n
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
