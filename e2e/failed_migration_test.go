package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failMigrationFlag makes the migration pod fail (the local provider's kwok fails pods
// annotated local.FailAnnotation="true"). The annotation key has a dot: escaped for --set.
var failMigrationFlag = "migrations.podAnnotations." + strings.ReplaceAll(local.FailAnnotation, ".", `\.`) + "=true"

// failedMigration (TestLifecycleScenarios): the migration Job of the target version fails. The upgrade
// exits non-zero with a message naming the Job and how to restore; no Deployment changed, the
// release stays at its previous revision (no new Helm revision), every workload is still
// ready and the data is intact. A rerun without the fault then upgrades.
func failedMigration(t *testing.T) {
	target := nextVersion(t, 1)
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsFailMigrate
	seeded := c.seed(t, ns)

	c.deploy(t, "install", "-n", ns, "--profile", "production").requireExit(t, 0)
	generations := deploymentGenerations(t, c, ns)
	chart := bumpedChart(t, target)
	backups := t.TempDir()

	res := c.deploy(t, "upgrade", "-n", ns, "--chart", chart, "--backup-dir", backups,
		"--set-string", failMigrationFlag).requireExit(t, 1)
	job := migrationJobName(target)
	for _, want := range []string{job, "revision 1", "polyaxon-deploy restore"} {
		assert.Containsf(t, res.Stderr, want, "the failure message names %q\n%s", want, res)
	}
	assert.Regexp(t, `(?i)migrat\w* .*failed|failed.*migrat`, res.Stderr)

	j, err := cs.BatchV1().Jobs(ns).Get(ctxT(t, time.Minute), job, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, jobCondition(j, batchv1.JobFailed), "the migration Job failed: %+v", j.Status.Conditions)

	t.Run("release stays at the previous revision", func(t *testing.T) {
		assert.Equal(t, map[int]string{1: "deployed"}, helmRevisions(t, cs, ns), "no Helm revision was created")
		st := c.statusOf(t, ns)
		assert.Equal(t, 1, st.Revision)
		assert.Equal(t, "deployed", st.Status)
		assert.Equal(t, installedVersion(t), st.AppVersion)
	})

	t.Run("no Deployment changed and every workload is ready", func(t *testing.T) {
		assert.Equal(t, generations, deploymentGenerations(t, c, ns), "Deployment generations")
		requireImagesAt(t, cs, ns, installedVersion(t))
		ok, why, err := workloadsReady(ctxT(t, time.Minute), cs, ns)
		require.NoError(t, err)
		assert.True(t, ok, why)
	})

	t.Run("data intact", func(t *testing.T) {
		assert.Equal(t, seeded, c.checksums(t, ns))
	})

	t.Run("a rerun without the fault upgrades", func(t *testing.T) {
		c.deploy(t, "upgrade", "-n", ns, "--chart", chart, "--backup-dir", backups).requireExit(t, 0)
		assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, cs, ns))
		j, err := cs.BatchV1().Jobs(ns).Get(ctxT(t, time.Minute), job, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, jobCondition(j, batchv1.JobComplete), "the rerun's migration Job completed: %+v", j.Status.Conditions)
		requireWorkloadsReady(t, cs, ns, time.Minute)
		requireImagesAt(t, cs, ns, target)
		assert.Equal(t, seeded, c.checksums(t, ns))
	})
}

func deploymentGenerations(t *testing.T, c *testCluster, ns string) map[string]int64 {
	t.Helper()
	deps, err := c.Clientset.AppsV1().Deployments(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int64{}
	for _, d := range deps.Items {
		out[d.Name] = d.Generation
	}
	return out
}
