package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/cloudnativepg"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
)

// TestPlatformOnCloudNativePGOnKind (issue 55, items 3 and 4): the production profile on kind
// with three core nodes, the operator and a Postgres built here (build-kind-images.sh
// cloudnativepg):
//   - `install` on the chart's StatefulSet, runs submitted through Polyaxon's CLI; `upgrade
//     --move-postgres -f values/cloudnativepg.yaml` moves the database onto a Cluster of three
//     instances, one per core node, with every run (the row counts it reports, the runs the API
//     lists); the StatefulSet's volume stays; `status` shows each instance, its role and its
//     lag, and `check` passes;
//   - the primary's pod is deleted while a run is being submitted, then the new primary's node
//     is drained (cordon, then every pod evicted as `kubectl drain` does): each time the API
//     answers again within the bound below, a write succeeds, no run is lost, and no container
//     of the platform's restarts;
//   - `status` shows the new primary, and `check` passes once the node is back;
//   - the way back: `upgrade --move-postgres --set postgresql.mode=statefulset`, every run
//     still there.
//
// It runs with E2E_CLOUDNATIVEPG=1 on a machine that can run kind's nodes.
func TestPlatformOnCloudNativePGOnKind(t *testing.T) {
	if os.Getenv(cloudNativePGEnv) != "1" {
		t.Skipf("%s=1 runs it (CloudNativePG on kind is not part of make test yet)", cloudNativePGEnv)
	}
	t.Parallel()
	p, images := kindScenarioSetup(t)
	ctx := context.Background()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	deployBinary(t)
	cnpgImages, err := cloudnativepg.BuildImages(ctxT(t, 20*time.Minute), nil)
	require.NoError(t, err)
	moduleDir, err := cloudnativepg.ModuleDir(ctxT(t, 10*time.Minute))
	require.NoError(t, err)

	pools := kind.Pools()
	for i := range pools {
		if pools[i].Name == cluster.PoolCore {
			pools[i].Count = 3 // an instance each
		}
	}
	name := cluster.UniqueName("e2e-cnpg-platform")
	start := time.Now()
	c, err := p.Create(ctx, name, cluster.WithNodePools(pools...), cluster.WithTimeout(10*time.Minute))
	t.Cleanup(func() {
		if os.Getenv("KIND_RETAIN") == "1" {
			t.Logf("kind cluster %s kept (KIND_RETAIN=1)", name)
			return
		}
		assert.NoError(t, p.Delete(context.Background(), name))
	})
	require.NoError(t, err)
	nodes := 0
	for _, pool := range pools {
		nodes += pool.Count
	}
	t.Logf("kind cluster %s: a control plane and %d pool nodes created in %s", name, nodes, time.Since(start).Round(time.Second))
	start = time.Now()
	require.NoError(t, p.LoadImages(ctx, c, kind.ImagesByPool(images)...))
	t.Logf("loaded %d images into the nodes in %s", len(images), time.Since(start).Round(time.Second))
	takeShare(t, rank{share: kindCluster, longest: true})

	// The operator on the control plane, so that no node below takes it along.
	op, err := cloudnativepg.Install(ctxT(t, 10*time.Minute), c, cloudnativepg.Options{ModuleDir: moduleDir, Images: cnpgImages, Kind: p}.OnControlPlane())
	require.NoError(t, err)
	t.Logf("operator %s available after %s", op.Image, (op.Load + op.Apply + op.Available + op.Webhooks).Round(time.Second))

	ns, cluster0 := nsInstall, releaseName+"-postgresql"
	kubeconfig := []string{"--kubeconfig", c.KubeconfigPath, "-n", ns}
	start = time.Now()
	// Redis without a claim: kind's claims (local-path) hold a pod on its node, and the drain
	// below would stop Redis, a single pod, until the node is back. That is Redis's own single
	// point of failure, not the database's; with storage that follows a pod it moves.
	res := startDeploy(t, append([]string{"install", "--profile", "production", "-f", filepath.Join(root, "values", "kind-demo.yaml"),
		"--set", "postgresql.persistence.size=1Gi", "--set", "redis.persistence.enabled=false", "--set", "edge.enabled=false",
		"--timeout", "20m", "-o", "json"}, kubeconfig...)...).wait(t, 25*time.Minute)
	require.Equal(t, 0, res.Code, "install: %s", res)
	t.Logf("install --profile production (Postgres in the StatefulSet): %s", time.Since(start).Round(time.Second))
	cs := c.Clientset

	venv, _ := polyaxonPrograms(t)
	gateway := kindPortForward(t, c, ns, "svc/"+releaseName+"-gateway", 80)
	cli := newPolyaxonCLI(t, venv, gateway)
	cliCtx := ctxT(t, 40*time.Minute)
	_, err = cli.run(cliCtx, "project", "create", "--name", "ha")
	require.NoError(t, err)
	hello := filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml")
	var runs []string
	for range 2 {
		runs = append(runs, cli.submit(t, cliCtx, hello, "ha"))
	}
	for _, uuid := range runs {
		cli.waitStatus(t, cliCtx, "ha", uuid, "succeeded")
	}
	// listed waits for the API to list every run: after an upgrade the gateway's new pods take
	// over, and the port-forward follows them.
	listed := func(t *testing.T) {
		t.Helper()
		var out string
		waitFor(t, 3*time.Minute, "the API lists the runs", func(ctx context.Context) (bool, string, error) {
			var err error
			if out, err = cli.run(ctx, "ops", "ls", "-p", "ha"); err != nil {
				return false, lastLines(err.Error(), 2), nil
			}
			return true, "", nil
		})
		for _, uuid := range runs {
			assert.Contains(t, out, uuid[:8], "run %s listed", uuid)
		}
	}
	backups := t.TempDir()
	move := func(t *testing.T, args ...string) {
		t.Helper()
		start := time.Now()
		res := startDeploy(t, append(append([]string{"upgrade", "--move-postgres", "--backup-dir", backups, "--timeout", "15m", "-o", "json"}, args...), kubeconfig...)...).wait(t, 25*time.Minute)
		require.Equal(t, 0, res.Code, "upgrade --move-postgres: %s", res)
		var doc struct {
			Data struct {
				Move *struct {
					From, To    string
					Tables      int
					Rows        int64
					RowsByTable map[string]int64
				} `json:"postgresMove"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &doc), res.Stdout)
		m := doc.Data.Move
		require.NotNil(t, m, "the upgrade reports the move")
		t.Logf("upgrade --move-postgres %s: %s -> %s in %s: %d tables, %d rows (db_run %d, db_project %d)", strings.Join(args, " "), m.From, m.To,
			time.Since(start).Round(time.Second), m.Tables, m.Rows, m.RowsByTable["public.db_run"], m.RowsByTable["public.db_project"])
		assert.GreaterOrEqual(t, m.RowsByTable["public.db_run"], int64(len(runs)), "every run's row restored")
		listed(t)
	}
	t.Run("the StatefulSet's database moves onto a CloudNativePG Cluster with every run", func(t *testing.T) {
		move(t, "-f", filepath.Join(root, "values", "cloudnativepg.yaml"))
		_, err := cs.AppsV1().StatefulSets(ns).Get(ctx, cluster0, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the StatefulSet is gone: %v", err)
		claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=postgresql,!cnpg.io/cluster"})
		require.NoError(t, err)
		assert.NotEmpty(t, claims.Items, "the StatefulSet's volume is kept: the way back")
	})

	pgStatus := func(t *testing.T) *cnpg.State {
		t.Helper()
		out := deploy(t, "status", "--kubeconfig", c.KubeconfigPath, "-n", ns, "-o", "json").requireExit(t, 0)
		var doc struct {
			Data struct {
				Postgres *cnpg.State `json:"postgres"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.Stdout), &doc), out.Stdout)
		require.NotNil(t, doc.Data.Postgres, "status shows the Cluster")
		return doc.Data.Postgres
	}
	statusText := func(t *testing.T, when string) {
		t.Helper()
		out := deploy(t, "status", "--kubeconfig", c.KubeconfigPath, "-n", ns).requireExit(t, 0)
		t.Logf("status %s:\n%s", when, out.Stdout)
	}
	before := pgStatus(t)
	statusText(t, "before the failovers")
	t.Run("the Cluster has three instances on three core nodes, and status shows their roles and lag", func(t *testing.T) {
		assert.True(t, before.Healthy(), before.Problem())
		require.Len(t, before.Members, 3)
		nodes := map[string]bool{}
		pools := nodePools(t, cs)
		for _, m := range before.Members {
			nodes[m.Node] = true
			assert.Equal(t, cluster.PoolCore, pools[m.Node], "%s on %s", m.Pod, m.Node)
			if m.Role != cnpg.RolePrimary {
				require.NotNil(t, m.LagBytes, "%s: its lag behind the primary (%s)", m.Pod, before.LagUnknown)
			}
		}
		assert.Len(t, nodes, 3, "one instance per node")
		deploy(t, "check", "--kubeconfig", c.KubeconfigPath, "-n", ns).requireExit(t, 0)
	})
	restarts := platformRestarts(t, cs, ns)

	// failover loses the primary with lose, and times, from then: the API's first failed and
	// next successful read of a run (a database read), and the first write that succeeds (a
	// project created through the CLI). The bound is what a user would wait.
	const bound = 2 * time.Minute
	writes := 0
	failover := func(t *testing.T, what string, lose func(primary string)) string {
		primary := pgStatus(t).Primary
		t.Logf("%s (primary %s)", what, primary)
		start := time.Now()
		var during string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a run submitted while the primary goes
			defer wg.Done()
			for time.Since(start) < bound {
				if out, err := cli.run(cliCtx, "run", "-f", hello, "-p", "ha"); err == nil {
					if m := runCreatedRE.FindStringSubmatch(out); m != nil {
						during = m[1]
						return
					}
				}
				time.Sleep(time.Second)
			}
		}()
		lose(primary)
		var firstFailure, back time.Duration
		waitFor(t, bound, "the API reads a run again", func(ctx context.Context) (bool, string, error) {
			_, _, err := cli.statuses(ctx, "ha", runs[0])
			now := time.Since(start)
			if err != nil {
				if firstFailure == 0 {
					firstFailure = now
				}
				return false, err.Error(), nil
			}
			// A read before the primary is gone proves nothing: wait for the new one.
			s, serr := cnpg.Read(ctx, cs, ns, cluster0, nil)
			if serr != nil || s.Primary == primary || s.Primary == "" {
				return false, "still the old primary", nil
			}
			back = now
			return true, "", nil
		})
		var wrote time.Duration
		waitFor(t, bound, "a write succeeds", func(ctx context.Context) (bool, string, error) {
			_, err := cli.run(ctx, "project", "create", "--name", fmt.Sprintf("after-%d", writes+1))
			if err != nil {
				return false, lastLines(err.Error(), 2), nil
			}
			writes++
			wrote = time.Since(start)
			return true, "", nil
		})
		wg.Wait()
		require.NotEmpty(t, during, "a run submitted during the failover within %s", bound)
		runs = append(runs, during)
		after := pgStatus(t).Primary
		t.Logf("%s: first failed read %s, reads again %s, first write %s, new primary %s (was %s)",
			what, firstFailure.Round(100*time.Millisecond), back.Round(100*time.Millisecond), wrote.Round(100*time.Millisecond), after, primary)
		assert.NotEqual(t, primary, after)
		assert.Less(t, back, bound)
		return after
	}

	t.Run("the primary's pod deleted: the API answers again, and no run is lost", func(t *testing.T) {
		failover(t, "the primary's pod deleted", func(primary string) {
			require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, primary, metav1.DeleteOptions{}))
		})
	})

	var drained, drainedPrimary, promoted string
	t.Run("the primary's node drained: the operator switches over, and no run is lost", func(t *testing.T) {
		promoted = failover(t, "the primary's node drained", func(primary string) {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, primary, metav1.GetOptions{})
			require.NoError(t, err)
			drained, drainedPrimary = pod.Spec.NodeName, primary
			drainNode(t, c, drained)
		})
	})

	t.Run("every run is there and succeeds, and no platform container restarted", func(t *testing.T) {
		for _, uuid := range runs {
			cli.waitStatus(t, cliCtx, "ha", uuid, "succeeded")
		}
		out, err := cli.run(cliCtx, "ops", "ls", "-p", "ha")
		require.NoError(t, err)
		for _, uuid := range runs {
			assert.Contains(t, out, uuid[:8], "run %s listed", uuid)
		}
		// The pods that were there carry on; a pod the drain evicted starts again elsewhere,
		// and may restart while the API comes back (the agent exits when it cannot reach it).
		after := platformRestarts(t, cs, ns)
		for pod, n := range after {
			was, ok := restarts[pod]
			if !ok {
				t.Logf("%s: new since the failovers, %d restarts", pod, n)
				continue
			}
			if !assert.Equal(t, was, n, "%s: restarts", pod) {
				logRestarted(t, cs, ns)
			}
		}
	})

	t.Run("the node back, the Cluster is healthy with the new primary and check passes", func(t *testing.T) {
		require.NotEmpty(t, drained)
		patch := []byte(`{"spec":{"unschedulable":false}}`)
		_, err := cs.CoreV1().Nodes().Patch(ctx, drained, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		waitFor(t, 5*time.Minute, "the Cluster healthy again", func(ctx context.Context) (bool, string, error) {
			s, err := cnpg.Read(ctx, cs, ns, cluster0, nil)
			if err != nil {
				return false, err.Error(), nil
			}
			return s.Healthy(), s.Problem(), nil
		})
		s := pgStatus(t)
		assert.Equal(t, promoted, s.Primary, "status shows the primary promoted when %s's node was drained", drainedPrimary)
		assert.NotEqual(t, drainedPrimary, s.Primary)
		statusText(t, "after the failovers")
		// The pods the drain evicted become ready again on their own.
		waitFor(t, 5*time.Minute, "check passes", func(ctx context.Context) (bool, string, error) {
			res := deploy(t, "check", "--kubeconfig", c.KubeconfigPath, "-n", ns)
			return res.Code == 0, lastLines(res.Stdout, 3), nil
		})
	})

	t.Run("the way back: the database moves onto the StatefulSet again with every run", func(t *testing.T) {
		move(t, "--set", "postgresql.mode=statefulset")
		for _, uuid := range runs {
			cli.waitStatus(t, cliCtx, "ha", uuid, "succeeded")
		}
		deploy(t, "check", "--kubeconfig", c.KubeconfigPath, "-n", ns).requireExit(t, 0)
	})
}

// platformRestarts are the restarts of each platform container, by "pod/container" (the
// Postgres instances are the operator's to restart).
func platformRestarts(t *testing.T, cs kubernetes.Interface, ns string) map[string]int32 {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=polyaxon,!cnpg.io/cluster"})
	require.NoError(t, err)
	out := map[string]int32{}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			out[p.Name+"/"+st.Name] = st.RestartCount
		}
	}
	return out
}

// logRestarted logs why the platform's restarted containers last ended, and their last lines.
func logRestarted(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=polyaxon,!cnpg.io/cluster"})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount == 0 {
				continue
			}
			why := ""
			if term := st.LastTerminationState.Terminated; term != nil {
				why = fmt.Sprintf("exit %d (%s) at %s", term.ExitCode, term.Reason, term.FinishedAt.Format(time.TimeOnly))
			}
			tail := int64(15)
			out, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: st.Name, Previous: true, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				out = []byte(err.Error())
			}
			t.Logf("%s/%s restarted %d times, last %s:\n%s", p.Name, st.Name, st.RestartCount, why, out)
		}
	}
}

// drainNode does what `kubectl drain --ignore-daemonsets --delete-emptydir-data` does: cordon,
// then evict every pod but DaemonSets' through the Eviction API, again while a budget refuses.
func drainNode(t *testing.T, c *cluster.Cluster, node string) {
	t.Helper()
	ctx := ctxT(t, 5*time.Minute)
	cs := c.Clientset
	_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitFor(t, 5*time.Minute, "node "+node+" drained", func(ctx context.Context) (bool, string, error) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, p := range pods.Items {
			if slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) ||
				p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Namespace == "kube-system" {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
				return false, "", err
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
}
