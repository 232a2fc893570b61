package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	helmvalues "helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// helmAndPolyaxonDeploy (TestLifecycleScenarios): one release driven by both tools. Installed with
// polyaxon-deploy, upgraded with the chart alone through the Helm SDK as `helm upgrade -f
// values/production.yaml -f my-values.yaml` does (gateway 3 replicas), then upgraded with
// polyaxon-deploy: it says the revision was made outside it, lists the value it would revert
// and refuses without --yes (nothing changes); check warns; a backup reads the Helm-made
// revision; --keep-release-values keeps the Helm change and stores it; a rollback to the Helm
// revision is told apart again, and --yes reverts what it lists.
func helmAndPolyaxonDeploy(t *testing.T) {
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsHelmMixed
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	replicas := func() int32 {
		t.Helper()
		gw, err := cs.AppsV1().Deployments(ns).Get(ctxT(t, time.Minute), "polyaxon-gateway", metav1.GetOptions{})
		require.NoError(t, err)
		return *gw.Spec.Replicas
	}
	checkOf := func(res output.Result, id string) check.Result {
		for _, r := range res.Checks {
			if r.ID == id {
				return r
			}
		}
		t.Fatalf("no check %s in %+v", id, res.Checks)
		return check.Result{}
	}

	seeded := c.seed(t, ns)
	c.deploy(t, "install", "-n", ns, "--profile", "production").requireExit(t, 0)
	require.Equal(t, int32(2), replicas())

	// helm upgrade polyaxon charts/polyaxon -f values/production.yaml -f my-values.yaml --wait
	mine := filepath.Join(t.TempDir(), "my-values.yaml")
	require.NoError(t, os.WriteFile(mine, []byte("gateway:\n  replicas: 3\n"), 0o600))
	opts := helmvalues.Options{ValueFiles: []string{filepath.Join(root, "values", "production.yaml"), mine}}
	vals, err := opts.MergeValues(getter.All(cli.New()))
	require.NoError(t, err)
	ch, err := loader.Load(filepath.Join(root, "charts", "polyaxon"))
	require.NoError(t, err)
	cfg := helmConfiguration(t, c, ns)
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	up.Wait, up.Timeout = true, helmTimeout
	ctx, cancel := context.WithTimeout(context.Background(), helmTimeout+time.Minute)
	defer cancel()
	start := time.Now()
	rel, err := up.RunWithContext(ctx, releaseName, ch, vals)
	t.Logf("helm upgrade -f values/production.yaml -f my-values.yaml --wait: %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "helm upgrade")
	require.Equal(t, 2, rel.Version)
	require.Equal(t, int32(3), replicas())
	requireWorkloadsReady(t, cs, ns, time.Minute)

	t.Run("upgrade warns, lists the value it would revert and refuses without --yes", func(t *testing.T) {
		res := c.deploy(t, "upgrade", "-n", ns, "--profile", "production", "-o", "json").requireExit(t, 2)
		assert.Contains(t, res.Stderr, "revision 2 was made outside polyaxon-deploy")
		assert.Contains(t, res.Stderr, "the upgrade would revert 1 value(s) of revision 2:\n  gateway.replicas: 3 -> 2")
		assert.Contains(t, res.Stderr, "--keep-release-values")
		assert.Contains(t, res.Stderr, "pass --yes")
		r := res.result(t)
		assert.Contains(t, r.Warnings, "to revert: gateway.replicas: 3 -> 2")
		assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, cs, ns), "no revision was made")
		assert.Equal(t, int32(3), replicas(), "no silent revert")
	})

	t.Run("check warns that the deployed revision is not polyaxon-deploy's", func(t *testing.T) {
		res := c.deploy(t, "check", "-n", ns, "-o", "json").requireExit(t, 0)
		origin := checkOf(res.result(t), "release-origin")
		assert.Equal(t, check.Warned, origin.Status)
		assert.Contains(t, origin.Detail, "revision 2 was made outside polyaxon-deploy")
		assert.Contains(t, origin.Detail, "revision 1's")
		c.deploy(t, "check", "-n", ns, "--strict").requireExit(t, 4)
	})

	t.Run("a backup reads the Helm-made revision", func(t *testing.T) {
		dir := t.TempDir()
		c.deploy(t, "backup", "-n", ns, "--dir", dir).requireExit(t, 0)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		m, err := backup.ReadManifest(filepath.Join(dir, entries[0].Name()))
		require.NoError(t, err)
		assert.Equal(t, 2, m.Revision)
		deploy(t, "backup", "verify", filepath.Join(dir, entries[0].Name())).requireExit(t, 0)
		assert.Equal(t, seeded, c.checksums(t, ns), "the data is intact")
	})

	t.Run("--keep-release-values keeps the Helm change and stores it", func(t *testing.T) {
		res := c.deploy(t, "upgrade", "-n", ns, "--keep-release-values", "--backup-dir", t.TempDir(), "-o", "json").requireExit(t, 0)
		assert.Contains(t, res.Stderr, "revision 2 was made outside polyaxon-deploy")
		assert.Contains(t, res.Stderr, "--keep-release-values: revision 2's values are kept")
		assert.NotContains(t, res.Stderr, "would revert")
		assert.Equal(t, 3, res.result(t).Release.Revision)
		assert.Equal(t, int32(3), replicas(), "the Helm change survives")
		requireWorkloadsReady(t, cs, ns, time.Minute)

		stored, rev, err := release.NewFromConfiguration(cfg, cs, ns, releaseName).InputsFor(ctxT(t, time.Minute), 3)
		require.NoError(t, err)
		assert.Equal(t, 3, rev, "polyaxon-deploy stored the new revision's inputs")
		assert.Equal(t, "production", stored.Profile)
		require.Len(t, stored.ValuesFiles, 1, "the release's values replace revision 1's -f/--set")
		assert.Equal(t, "values of revision 2 (--keep-release-values)", stored.ValuesFiles[0].Name)
		assert.Contains(t, stored.ValuesFiles[0].Content, "replicas: 3")

		res = c.deploy(t, "check", "-n", ns, "-o", "json").requireExit(t, 0)
		assert.Equal(t, check.Passed, checkOf(res.result(t), "release-origin").Status)
		// The next upgrade replays the kept values: nothing to revert, nothing to confirm.
		res = c.deploy(t, "upgrade", "-n", ns, "--dry-run").requireExit(t, 0)
		assert.NotContains(t, res.Stderr, "outside polyaxon-deploy")
	})

	t.Run("a rollback to the Helm revision is told apart; --yes reverts what it lists", func(t *testing.T) {
		// Revision 2 again, as revision 4: gateway 3 from Helm's values, gateway 2 in the
		// stored inputs of revision 1 once the kept layer is gone.
		res := c.deploy(t, "rollback", "-n", ns, "2").requireExit(t, 0)
		assert.Contains(t, res.Stderr, "revision 2 was made outside polyaxon-deploy")
		res = c.deploy(t, "check", "-n", ns, "-o", "json").requireExit(t, 0)
		assert.Equal(t, check.Warned, checkOf(res.result(t), "release-origin").Status)

		res = c.deploy(t, "upgrade", "-n", ns, "--reset-values", "--yes", "--backup-dir", t.TempDir(), "-o", "json").requireExit(t, 0)
		assert.Contains(t, res.Stderr, "revision 4 was made outside polyaxon-deploy")
		r := res.result(t)
		assert.Equal(t, 5, r.Release.Revision)
		assert.Contains(t, strings.Join(r.Warnings, "\n"), "revision 4 was made outside polyaxon-deploy; 1 of its value(s) reverted")
		assert.Contains(t, r.Warnings, "reverted: gateway.replicas: 3 -> 2")
		assert.Equal(t, int32(2), replicas(), "reverted, as listed and confirmed")
	})
}
