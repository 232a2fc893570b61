package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScenario12PolyaxonRuns: `install --profile production` on the local provider, where the
// platform's pods run Polyaxon's own programs (haupt's API and migrations, the polyaxon agent,
// the operator stand-in) with the environment the chart renders; then Polyaxon's own CLI,
// pointed at the gateway Service, creates a project and runs polyaxonfiles, and each run goes
// from the real API through the real agent (with its own ServiceAccount's token) and the
// operator to pods placed on the category's pool.
func TestScenario12PolyaxonRuns(t *testing.T) {
	ns := nsInstall
	c := polyaxonCluster(t, "polyaxon", ns)
	venv, _ := polyaxonPrograms(t)
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "rabbitmq.enabled=false", "--set", "redis.enabled=false",
	).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

	addr, err := c.ServiceAddress(ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	ctx := ctxT(t, 5*time.Minute)
	out, err := cli.run(ctx, "project", "create", "--name", "demo")
	require.NoError(t, err)
	t.Log(out)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	out, err = cli.run(ctx, "run", "-f", root+"/values/polyaxonfiles/hello-job.yaml", "-p", "demo")
	require.NoError(t, err)
	t.Log(out)

	waitFor(t, 3*time.Minute, "the run's pod", func(ctx context.Context) (bool, string, error) {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=polyaxon"})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, p.Name+" "+string(p.Status.Phase)+" "+p.Spec.NodeName)
			if p.Status.Phase == corev1.PodSucceeded {
				return true, "", nil
			}
		}
		return false, strings.Join(seen, "; "), nil
	})
}
