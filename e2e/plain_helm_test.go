package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// helmTimeout bounds each Helm action: a hook that waits on the release it belongs to (the
// deadlock users of other charts hit with hooks and --wait) would hang until it.
const helmTimeout = 3 * time.Minute

// plainHelm (TestLifecycleScenarios): the chart alone, installed and upgraded through the Helm SDK as
// `helm install/upgrade --wait --wait-for-jobs` would, with migrations as Helm hooks
// (migrations.useHelmHooks=true). Both finish well within the timeout, the post-install and
// pre-upgrade migration Jobs complete, and the pre-upgrade one completes before the
// Deployments roll.
func plainHelm(t *testing.T) {
	target := nextVersion(t, 1)
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsPlainHelm
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	cfg := helmConfiguration(t, c, ns)
	vals := map[string]any{"migrations": map[string]any{"useHelmHooks": true}}

	ch, err := loader.Load(filepath.Join(root, "charts", "polyaxon"))
	require.NoError(t, err)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = releaseName, ns, true
	in.Wait, in.WaitForJobs, in.Timeout = true, true, helmTimeout
	ctx, cancel := context.WithTimeout(context.Background(), helmTimeout+time.Minute)
	defer cancel()
	start := time.Now()
	rel, err := in.RunWithContext(ctx, ch, vals)
	t.Logf("helm install --wait --wait-for-jobs: %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "helm install")
	assert.Equal(t, helmrelease.StatusDeployed, rel.Info.Status)
	assert.Less(t, time.Since(start), helmTimeout/2, "install finished well before the timeout")
	requireWorkloadsReady(t, cs, ns, time.Minute)
	// A first install migrates in a Job of the release, not a hook: the gateway waits for it,
	// and Helm runs post-install hooks only once the gateway is Ready (issue 38).
	installJob := requireJobComplete(t, c, ns, migrationJobName(installedVersion(t)))
	assert.NotContains(t, installJob.Annotations, "helm.sh/hook")

	ch2, err := loader.Load(bumpedChart(t, target))
	require.NoError(t, err)
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	up.Wait, up.WaitForJobs, up.Timeout = true, true, helmTimeout
	start = time.Now()
	rel, err = up.RunWithContext(ctx, releaseName, ch2, vals)
	t.Logf("helm upgrade --wait --wait-for-jobs: %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "helm upgrade")
	assert.Equal(t, helmrelease.StatusDeployed, rel.Info.Status)
	assert.Equal(t, 2, rel.Version)
	assert.Less(t, time.Since(start), helmTimeout/2, "upgrade finished well before the timeout")
	requireWorkloadsReady(t, cs, ns, time.Minute)
	requireImagesAt(t, cs, ns, target)

	hook := requireJobComplete(t, c, ns, migrationJobName(target))
	assert.Contains(t, hook.Annotations["helm.sh/hook"], "pre-upgrade")
	for _, ct := range hook.Spec.Template.Spec.Containers {
		assert.True(t, strings.HasSuffix(ct.Image, ":"+target), "the hook migrates with the target image, got %s", ct.Image)
	}
	rolled := newReplicaSets(t, cs, ns, target)
	require.NotEmpty(t, rolled)
	for dep, rs := range rolled {
		assert.Falsef(t, rs.CreationTimestamp.Time.Before(hook.Status.CompletionTime.Time),
			"Deployment %s rolled (%s) before the pre-upgrade migration completed (%s)", dep, rs.CreationTimestamp, hook.Status.CompletionTime)
	}
}

// helmConfiguration is a Helm SDK configuration for namespace ns of the cluster, as the helm
// CLI builds it from --kubeconfig and --namespace.
func helmConfiguration(t *testing.T, c *testCluster, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptrTo(c.KubeconfigPath)
	flags.Namespace = ptrTo(ns)
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, ns, "secret", func(string, ...any) {}))
	return cfg
}

func requireJobComplete(t *testing.T, c *testCluster, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := c.Clientset.BatchV1().Jobs(ns).Get(ctxT(t, time.Minute), name, metav1.GetOptions{})
	require.NoError(t, err, "Job %s/%s", ns, name)
	require.True(t, jobCondition(j, batchv1.JobComplete), "Job %s complete: %+v", name, j.Status.Conditions)
	require.NotNil(t, j.Status.CompletionTime)
	return j
}
