package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/cloudnativepg"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
)

// cloudNativePGEnv turns TestCloudNativePGFailoverOnKind on: it is not part of make test yet.
const cloudNativePGEnv = "E2E_CLOUDNATIVEPG"

// TestCloudNativePGFailoverOnKind (issue 55, failover on kind): CloudNativePG 1.28.0 and a
// Postgres of Debian's packages, both built here (build-kind-images.sh cloudnativepg), on a
// kind cluster of three core nodes:
//   - the add-on installs the operator, which answers through its webhooks;
//   - a Cluster of three instances, one per node, in a namespace enforcing the restricted Pod
//     Security level, becomes healthy: a primary and two streaming replicas;
//   - a row written on the primary is there after the primary's pod is deleted: a replica is
//     promoted, the read-write Service leads to it, and the deleted instance comes back as a
//     replica of the new primary;
//   - the same when the new primary's node freezes (docker pause of its container): a replica
//     is promoted while the node is gone, and once it is back its old primary rejoins as a
//     replica and replays what the new primary wrote.
//
// It runs with E2E_CLOUDNATIVEPG=1 on a machine that can run kind's nodes, after `make
// kind-images`; elsewhere it is skipped and says why. Every step's time is logged.
func TestCloudNativePGFailoverOnKind(t *testing.T) {
	if os.Getenv(cloudNativePGEnv) != "1" {
		t.Skipf("%s=1 runs it (CloudNativePG on kind is not part of make test yet)", cloudNativePGEnv)
	}
	t.Parallel()
	if os.Getenv("DOCKER_HOST") == "" {
		require.NoError(t, os.Setenv("DOCKER_HOST", kind.OfflineDockerHost))
	}
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	if out, err := exec.Command("bash", filepath.Join(root, "e2e", "scripts", "build-kind-images.sh"), "preflight").CombinedOutput(); err != nil {
		t.Skipf("kind cannot run on this machine: %s", lastLines(strings.TrimSpace(string(out)), 8))
	}
	ctx := ctxT(t, 40*time.Minute)
	start := time.Now()
	images, err := cloudnativepg.BuildImages(ctx, nil)
	require.NoError(t, err)
	moduleDir, err := cloudnativepg.ModuleDir(ctx)
	require.NoError(t, err)
	t.Logf("images %v (built or reused in %s), module %s", images.All(), time.Since(start).Round(time.Second), moduleDir)
	p, err := kind.NewOfflineProvider(ctx, kind.WithDataDir(t.TempDir()))
	if err != nil {
		t.Skipf("kind: %v", err)
	}

	// Three core nodes beside the control plane (which keeps its taint): one instance each.
	name := cluster.UniqueName("e2e-cnpg")
	start = time.Now()
	c, err := p.Create(ctx, name, cluster.WithNodePools(cluster.NodePool{Name: cluster.PoolCore, Count: 3}), cluster.WithTimeout(10*time.Minute))
	t.Cleanup(func() {
		if os.Getenv("KIND_RETAIN") == "1" {
			t.Logf("kind cluster %s kept (KIND_RETAIN=1)", name)
			return
		}
		start := time.Now()
		assert.NoError(t, p.Delete(context.Background(), name))
		t.Logf("kind cluster %s: deleted in %s", name, time.Since(start).Round(time.Second))
	})
	require.NoError(t, err)
	t.Logf("kind cluster %s: a control plane and 3 core nodes created in %s", name, time.Since(start).Round(time.Second))
	takeShare(t, rank{share: kindCluster})

	// The operator on the control plane: the node frozen below is an instance's, never the
	// operator's (whose loss would hold the failover until its pod is evicted and started
	// again elsewhere). The images go to every node.
	op, err := cloudnativepg.Install(ctx, c, cloudnativepg.Options{ModuleDir: moduleDir, Images: images, Kind: p}.OnControlPlane())
	require.NoError(t, err)
	t.Logf("operator %s: images loaded into 4 nodes in %s, applied in %s, Available after %s, webhooks answering after %s more",
		op.Image, op.Load.Round(time.Second), op.Apply.Round(time.Second), op.Available.Round(time.Second), op.Webhooks.Round(time.Second))

	const ns, pg = "pg", "pg"
	cs := c.Clientset
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	_, err = dyn.Resource(cloudnativepg.ClusterGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "postgresql.cnpg.io/v1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": pg},
		"spec": map[string]any{
			"instances":       int64(3),
			"imageName":       images.Operand,
			"imagePullPolicy": string(corev1.PullNever),
			"storage":         map[string]any{"size": "1Gi", "storageClass": "standard"},
			"affinity": map[string]any{
				"podAntiAffinityType": "required",
				"nodeSelector":        map[string]any{cluster.PoolLabel: cluster.PoolCore},
			},
		},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	start = time.Now()
	created := start
	logStatus := func(at time.Time, s cloudnativepg.ClusterStatus) {
		t.Logf("+%5.1fs phase %q (%s), %d/%d ready, primary %q target %q, %v", at.Sub(created).Seconds(),
			s.Phase, s.PhaseReason, s.ReadyInstances, s.Instances, s.CurrentPrimary, s.TargetPrimary, s.InstancesStatus)
	}
	healthy := func(s cloudnativepg.ClusterStatus) bool { return s.Healthy(3) }
	st, err := cloudnativepg.WaitCluster(ctxT(t, 15*time.Minute), c, ns, pg, time.Second, healthy, logStatus)
	require.NoError(t, err, "%s", describeCNPGPods(ctx, c, ns, pg))
	t.Logf("Cluster %s: %q after %s", pg, st.Phase, time.Since(start).Round(time.Second))

	pods := cnpgPods(t, c, ns, pg)
	nodes := map[string]bool{}
	for _, p := range pods {
		t.Logf("pod %s on %s: %s, ready %v", p.Name, p.Spec.NodeName, p.Labels["cnpg.io/instanceRole"], podReady(&p))
		nodes[p.Spec.NodeName] = true
	}
	require.Len(t, pods, 3)
	assert.Len(t, nodes, 3, "one instance per node")
	oldPrimary := st.CurrentPrimary

	// tryPsql runs one statement as postgres on a pod's socket, within 30 s: an exec into a pod
	// that is being replaced can hang.
	tryPsql := func(pod, sql string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, errOut, err := c.Exec(ctx, ns, pod, "postgres", []string{"psql", "-U", "postgres", "-d", "app", "-tAc", sql}, nil)
		if err != nil {
			return "", fmt.Errorf("psql on %s: %w: %s", pod, err, errOut)
		}
		return strings.TrimSpace(out), nil
	}
	psql := func(pod, sql string) string {
		t.Helper()
		out, err := tryPsql(pod, sql)
		require.NoError(t, err)
		return out
	}
	assert.Equal(t, "2", psql(oldPrimary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"), "replicas streaming from %s", oldPrimary)
	psql(oldPrimary, "CREATE TABLE failover (note text); INSERT INTO failover VALUES ('written on "+oldPrimary+"')")

	// Two failovers, each timed from the primary's loss: status.currentPrimary changes, the new
	// primary's pod is Ready with the primary's label, the read-write Service leads to it
	// alone; then, the old primary back (heal), the Cluster is healthy with 3 instances, the
	// old primary a replica of the new one, and every row written before is there.
	failovers := 0
	failover := func(what, oldPrimary string, lose, heal func()) string {
		t.Helper()
		t.Logf("%s (primary %s)", what, oldPrimary)
		start := time.Now()
		lose()
		var promoted, newReady, rwMoved time.Duration
		var newPrimary string
		err := wait.PollUntilContextCancel(ctxT(t, 10*time.Minute), 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			s, err := cloudnativepg.GetCluster(ctx, c, ns, pg)
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			now := time.Since(start)
			if promoted == 0 && s.CurrentPrimary != oldPrimary && s.CurrentPrimary != "" {
				promoted, newPrimary = now, s.CurrentPrimary
				t.Logf("+%5.1fs status.currentPrimary %s -> %s (target %s, %q)", now.Seconds(), oldPrimary, s.CurrentPrimary, s.TargetPrimary, s.Phase)
			}
			if newPrimary != "" && newReady == 0 {
				if p, err := cs.CoreV1().Pods(ns).Get(ctx, newPrimary, metav1.GetOptions{}); err == nil && podReady(p) && p.Labels["cnpg.io/instanceRole"] == "primary" {
					newReady = now
					t.Logf("+%5.1fs pod %s Ready and labelled primary", now.Seconds(), newPrimary)
				}
			}
			if newPrimary != "" && rwMoved == 0 && rwEndpointIs(ctx, c, ns, pg+"-rw", newPrimary) {
				rwMoved = now
				t.Logf("+%5.1fs Service %s-rw leads to %s alone", now.Seconds(), pg, newPrimary)
			}
			return newReady != 0 && rwMoved != 0, nil
		})
		require.NoError(t, err, "%s", describeCNPGPods(ctx, c, ns, pg))
		failovers++
		note := fmt.Sprintf("written on %s after failover %d", newPrimary, failovers)
		psql(newPrimary, "INSERT INTO failover VALUES ('"+note+"')")
		healed := time.Duration(0)
		if heal != nil {
			heal()
			healed = time.Since(start)
		}
		// Back to three: the Cluster healthy, the old primary's pod Ready as a replica, in
		// recovery, having replayed the row the new primary wrote.
		var last string
		err = wait.PollUntilContextCancel(ctxT(t, 10*time.Minute), time.Second, true, func(ctx context.Context) (bool, error) {
			s, err := cloudnativepg.GetCluster(ctx, c, ns, pg)
			if err != nil || !s.Healthy(3) || s.CurrentPrimary != newPrimary {
				last = fmt.Sprintf("phase %q, %d ready, primary %q, err %v", s.Phase, s.ReadyInstances, s.CurrentPrimary, err)
				return false, nil
			}
			p, err := cs.CoreV1().Pods(ns).Get(ctx, oldPrimary, metav1.GetOptions{})
			if err != nil || !podReady(p) || p.Labels["cnpg.io/instanceRole"] != "replica" {
				last = fmt.Sprintf("pod %s not a Ready replica (err %v)", oldPrimary, err)
				return false, nil
			}
			got, err := tryPsql(oldPrimary, "SELECT pg_is_in_recovery()::text || ' ' || count(*) FROM failover WHERE note = '"+note+"'")
			last = fmt.Sprintf("%s: %q %v", oldPrimary, got, err)
			return got == "true 1", nil
		})
		require.NoError(t, err, "%s; %s", last, describeCNPGPods(ctx, c, ns, pg))
		back := time.Since(start)
		t.Logf("%s: promoted %s after %s, Ready %s, the rw Service %s; healed at %s; healthy with %s a replica of %s after %s",
			what, newPrimary, promoted.Round(100*time.Millisecond), newReady.Round(100*time.Millisecond), rwMoved.Round(100*time.Millisecond),
			healed.Round(100*time.Millisecond), oldPrimary, newPrimary, back.Round(time.Second))
		assert.NotEqual(t, oldPrimary, newPrimary)
		assert.Equal(t, "2", psql(newPrimary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"), "replicas streaming from %s, %s among them", newPrimary, oldPrimary)
		for _, p := range cnpgPods(t, c, ns, pg) {
			t.Logf("pod %s on %s: %s, ready %v", p.Name, p.Spec.NodeName, p.Labels["cnpg.io/instanceRole"], podReady(&p))
		}
		return newPrimary
	}

	// 1. The primary's pod deleted, as `kubectl delete pod` does (its grace period).
	primary := failover("the primary's pod deleted", oldPrimary, func() {
		require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, oldPrimary, metav1.DeleteOptions{}))
	}, nil)
	// 2. The primary's node lost: its container frozen (docker pause: the kubelet, Postgres and
	// the instance manager stop at once, the address stays), thawed once the replica serves.
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, primary, metav1.GetOptions{})
	require.NoError(t, err)
	node := pod.Spec.NodeName
	docker := func(args ...string) {
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		require.NoError(t, err, "docker %v: %s", args, out)
	}
	// A failure while it is frozen thaws it before the cluster is deleted.
	t.Cleanup(func() { _ = exec.Command("docker", "unpause", node).Run() })
	failover("the primary's node frozen ("+node+")", primary, func() { docker("pause", node) }, func() { docker("unpause", node) })
	assert.Equal(t, "3", psql(primary, "SELECT count(*) FROM failover"), "every row on %s", primary)
}

// cnpgPods are a Cluster's instance pods, by name.
func cnpgPods(t *testing.T, c *cluster.Cluster, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := c.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "cnpg.io/cluster=" + name + ",cnpg.io/podRole=instance"})
	require.NoError(t, err)
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// describeCNPGPods says, for a failure, what each pod of a Cluster (its instances and their
// Jobs) is doing and where, and the end of each one's log.
func describeCNPGPods(ctx context.Context, c *cluster.Cluster, ns, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	list, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "cnpg.io/cluster=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "\npod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				fmt.Fprintf(&b, "; %s: %s", cond.Type, cond.Message)
			}
		}
		for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "; %s ready=%v restarts=%d", st.Name, st.Ready, st.RestartCount)
			if w := st.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s %s", w.Reason, w.Message)
			}
			if term := st.LastTerminationState.Terminated; term != nil {
				fmt.Fprintf(&b, " last exit %d %s", term.ExitCode, term.Reason)
			}
		}
		tail := int64(15)
		if raw, err := c.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx); err == nil {
			fmt.Fprintf(&b, "\n%s", raw)
		}
	}
	return b.String()
}

// rwEndpointIs says whether the Service's EndpointSlices have exactly one ready endpoint, the
// pod's.
func rwEndpointIs(ctx context.Context, c *cluster.Cluster, ns, svc, pod string) bool {
	eps, err := c.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return false
	}
	var ready []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && e.TargetRef != nil {
				ready = append(ready, e.TargetRef.Name)
			}
		}
	}
	return len(ready) == 1 && ready[0] == pod
}
