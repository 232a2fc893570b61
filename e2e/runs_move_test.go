package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// TestRunsMoveToTheirNamespace (issue 37, existing releases): a release whose runs
// live in the platform's namespace (as before runs.namespace) is upgraded to the production
// layout with one run still running. The upgrade warns of that run; new runs go to the runs'
// namespace and succeed; the run that was running keeps its pod where it was, and the API
// still lists it, since no runner watches the old namespace any more. What a user sees is
// logged for the README.
func TestRunsMoveToTheirNamespace(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns, runsNS := nsInstall, nsRuns
	c := polyaxonCluster(t, "moved", ns)
	venv, _ := polyaxonPrograms(t)
	createNamespace(t, c, ns)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	files := filepath.Join(root, "e2e", "testdata", "polyaxonfiles")
	common := []string{"--namespace", ns, "--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path=" + t.TempDir()}

	// The old layout: runs beside the platform (production refuses it, so its check is ignored).
	c.deploy(t, append([]string{"install", "--profile", "production", "--set", "runs.namespace=" + ns, "--ignore", "runs-namespace"}, common...)...).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	ctx := ctxT(t, 10*time.Minute)
	_, err = cli.run(ctx, "project", "create", "--name", "demo")
	require.NoError(t, err)
	finished := cli.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "demo")
	cli.waitStatus(t, ctx, "demo", finished, "succeeded")
	running := cli.submit(t, ctx, filepath.Join(files, "notebook.yaml"), "demo")
	waitRunPods(t, c, cli, ns, running, 1)
	cli.waitStatus(t, ctx, "demo", running, "running")

	// The upgrade to the production layout (the install's runs.namespace stands for a release
	// made before that value, so this run sets the profile's) warns of the run left behind, and
	// goes ahead.
	up := c.deploy(t, append([]string{"upgrade", "--profile", "production", "--set", "runs.namespace=" + runsNS}, common...)...).requireExit(t, 0)
	assert.Contains(t, up.Stderr, "run object(s) in namespace "+ns+" were made before runs.namespace: new runs go to "+runsNS,
		"the upgrade names the run left behind")
	t.Logf("upgrade's output:\n%s", lastLines(up.Stderr, 40))
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

	t.Run("a new run goes to the runs' namespace and succeeds", func(t *testing.T) {
		uuid := cli.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "demo")
		pods := waitRunPods(t, c, cli, runsNS, uuid, 1)
		assert.Equal(t, runsNS, pods[0].Namespace)
		cli.waitStatus(t, ctx, "demo", uuid, "succeeded")
	})
	t.Run("finished runs stay visible; the running one keeps its pod where it was", func(t *testing.T) {
		st, _, err := cli.statuses(ctx, "demo", finished)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", st)
		st, conds, err := cli.statuses(ctx, "demo", running)
		require.NoError(t, err)
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + running})
		require.NoError(t, err)
		assert.Len(t, pods.Items, 1, "the running run's pod stays in %s", ns)
		t.Logf("the run that was running: status %q in the API (%s), %d pod(s) left in %s", st, conds, len(pods.Items), ns)
		assert.Equal(t, "running", st, "nothing watches it any more: the API keeps its last status")

		// Stopped now, the run ends in the API, but the agent looks for it in the runs'
		// namespace: its pod stays.
		out, err := cli.run(ctx, "ops", "stop", "-p", "demo", "-uid", running, "--yes")
		require.NoError(t, err, out)
		cli.waitStatus(t, ctx, "demo", running, "stopped")
		pods, err = c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + running})
		require.NoError(t, err)
		assert.Len(t, pods.Items, 1, "the stopped run's pod is left in %s", ns)

		// Deleting its polyaxon.com object (what the warning tells) takes its pod with it.
		gvr := schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: "services"}
		dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
		objs, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, objs.Items, 1, "the notebook's Service object")
		name := objs.Items[0].GetName()
		t.Logf("the leftover: services.polyaxon.com/%s (finalizers %v)", name, objs.Items[0].GetFinalizers())
		require.NoError(t, dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		waitFor(t, 2*time.Minute, "the leftover run's pod gone", func(ctx context.Context) (bool, string, error) {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + running})
			if err != nil {
				return false, err.Error(), nil
			}
			_, getErr := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			return len(pods.Items) == 0 && apierrors.IsNotFound(getErr), fmt.Sprintf("%d pod(s), object: %v", len(pods.Items), getErr), nil
		})
	})
}
