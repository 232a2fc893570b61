package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// Core components run on the core pool, dependencies stay off the run pools (the chart's
// declaration, files/components.yaml).
var (
	coreComponents       = contract.EmbeddedComponents().Core
	dependencyComponents = contract.EmbeddedComponents().Dependencies
)

// runCategoryPools is where the production profile sends each run category (profiles/production.yaml:
// GPU work on the tainted experiments pool, image builds on the builds pool).
var runCategoryPools = map[string]string{
	"EXPERIMENTS":  cluster.PoolExperiments,
	"JOBS":         cluster.PoolExperiments,
	"TENSORBOARDS": cluster.PoolExperiments,
	"NOTEBOOKS":    cluster.PoolExperiments,
	"BUILDS":       cluster.PoolBuilds,
}

// productionInstall (TestLifecycleScenarios): `polyaxon-deploy install --profile production` on a cluster
// with core, experiments (GPU, tainted) and builds pools. Every workload becomes ready, core
// pods run on core nodes, Postgres/RabbitMQ/Redis never on experiments/builds nodes, the
// canary of each run category (placed as the chart's admission policies place its runs) lands
// on that category's pool, runs go to a namespace of their own (polyaxon-runs, created by the
// release) where the agent's, operator's and gateway's Roles are, and both namespaces enforce
// Pod Security "restricted" with every pod admitted.
func productionInstall(t *testing.T) {
	c := lifecycleCluster(t)
	cs := c.Clientset
	ns := nsInstall

	res := c.deploy(t, "install", "--profile", "production", "-o", "json").requireExit(t, 0)
	r := res.result(t)
	require.NotNil(t, r.Release)
	assert.Equal(t, "deployed", r.Release.Status)
	assert.Equal(t, 1, r.Release.Revision)
	assert.Equal(t, ns, r.Release.Namespace, "the default namespace")
	assert.Empty(t, failedChecks(r), "post-install checks")

	t.Run("every workload ready", func(t *testing.T) {
		ok, why, err := workloadsReady(context.Background(), cs, ns)
		require.NoError(t, err)
		require.True(t, ok, "install returned before its workloads were ready: %s", why)
		deps, err := cs.AppsV1().Deployments(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, d := range deps.Items {
			names = append(names, d.Name)
		}
		// Celery's scheduler only: Polyaxon CE publishes no worker or beat image (profiles/production.yaml).
		assert.ElementsMatch(t, []string{"polyaxon-gateway", "polyaxon-scheduler", "polyaxon-agent", "polyaxon-operator"}, names)
		sts, err := cs.AppsV1().StatefulSets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, sts.Items, 2, "postgresql, redis (the broker: Polyaxon 2.17 removed RabbitMQ)")
		gw, err := cs.AppsV1().Deployments(ns).Get(ctxT(t, time.Minute), "polyaxon-gateway", metav1.GetOptions{})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, gw.Status.ReadyReplicas, int32(2), "production runs an HA gateway")
		pods := podsOf(t, c, ns)
		for _, p := range pods {
			if p.Labels["app.kubernetes.io/component"] == "migrations" {
				// The install's migration Job (issue 38): done before the gateway served.
				assert.Equalf(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
				continue
			}
			assert.Equalf(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
			assert.Truef(t, podReady(&p), "pod %s Ready", p.Name)
		}
		// The installer's own view agrees.
		c.deploy(t, "check", "-o", "json").requireExit(t, 0)
		st := c.statusOf(t, ns)
		assert.Equal(t, "deployed", st.Status)
		assert.Equal(t, "production", st.Profile)
	})

	t.Run("core pods on core nodes, dependencies off the run pools", func(t *testing.T) {
		pools := nodePools(t, cs)
		seen := map[string]bool{}
		gatewayNodes := map[string]int{}
		for _, p := range podsOf(t, c, ns) {
			comp := p.Labels["app.kubernetes.io/component"]
			pool := pools[p.Spec.NodeName]
			require.NotEmptyf(t, p.Spec.NodeName, "pod %s is not scheduled", p.Name)
			seen[comp] = true
			if comp == "gateway" {
				gatewayNodes[p.Spec.NodeName]++
			}
			switch {
			case slices.Contains(coreComponents, comp):
				assert.Equalf(t, cluster.PoolCore, pool, "core pod %s (%s) runs on %s", p.Name, comp, p.Spec.NodeName)
			case slices.Contains(dependencyComponents, comp):
				assert.NotContainsf(t, []string{cluster.PoolExperiments, cluster.PoolBuilds}, pool, "dependency pod %s runs on %s (pool %s)", p.Name, p.Spec.NodeName, pool)
				assert.Equalf(t, cluster.PoolCore, pool, "the production profile keeps %s with the core pool", comp)
			default:
				t.Errorf("pod %s has unknown component %q", p.Name, comp)
			}
		}
		for _, comp := range []string{"gateway", "scheduler", "agent", "operator", "postgresql", "redis"} {
			assert.Truef(t, seen[comp], "no pod of component %s", comp)
		}
		// Two core nodes, two gateway replicas: an HA gateway has one on each.
		for node, n := range gatewayNodes {
			assert.Equalf(t, 1, n, "%d gateway replicas share node %s (all: %v)", n, node, gatewayNodes)
		}
	})

	t.Run("runs live in a namespace of their own, where the runners' rights are", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		runs, err := cs.CoreV1().Namespaces().Get(ctx, nsRuns, metav1.GetOptions{})
		require.NoError(t, err, "the release created the runs' namespace")
		assert.Equal(t, releaseName, runs.Annotations["meta.helm.sh/release-name"])
		assert.Equal(t, ns, runs.Annotations["meta.helm.sh/release-namespace"])
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "polyaxon-agent", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, nsRuns, cm.Data["POLYAXON_K8S_NAMESPACE"], "the agent sends runs there")
		for _, n := range []string{ns, nsRuns} {
			roles, err := cs.RbacV1().Roles(n).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
			require.NoError(t, err)
			var names []string
			for _, r := range roles.Items {
				names = append(names, r.Name)
			}
			if n == nsRuns {
				assert.Subset(t, names, []string{"polyaxon-agent", "polyaxon-operator", "polyaxon-gateway"}, "the runners' Roles are with the runs")
			} else {
				assert.Empty(t, names, "no runner has a right in the platform's namespace")
			}
		}
	})

	t.Run("run categories land on their pools", func(t *testing.T) {
		// The canary creates one pod per category with the scheduling the chart's admission
		// policies give it (TestRunPodsLandOnTheirPools creates Polyaxon-shaped run pods and checks the
		// policies themselves) and reports where the real scheduler put it.
		var pr plan.Result
		c.deploy(t, "plan", "--canary", "--no-release", "-o", "json").requireExit(t, 0).data(t, &pr)
		pools := nodePools(t, cs)
		require.Len(t, pr.Canary, len(runCategoryPools))
		for _, can := range pr.Canary {
			assert.Truef(t, can.Scheduled, "canary %s: %s %s", can.Category, can.Reason, can.Message)
			assert.Equalf(t, runCategoryPools[strings.ToUpper(can.Category)], pools[can.Node], "a %s run landed on %s", can.Category, can.Node)
			assert.True(t, can.Deleted, "canary %s deleted", can.Pod)
		}
	})

	t.Run("namespace enforces restricted and every pod was admitted", func(t *testing.T) {
		// The platform's namespace and the runs' own (created by the release) both enforce it.
		for _, n := range []string{ns, nsRuns} {
			nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), n, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"], n)

			// Enforcement is live: a pod breaking "restricted" is refused by admission.
			bad := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "privileged-probe"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox:1.36",
					SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}},
			}
			_, err = cs.CoreV1().Pods(n).Create(ctxT(t, time.Minute), bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.Error(t, err, "a privileged pod must be rejected in %s", n)
			assert.True(t, apierrors.IsForbidden(err), "rejected by Pod Security admission: %v", err)
			assert.Contains(t, err.Error(), "restricted")
		}

		// Every controller got all of its pods: none was refused (FailedCreate) by admission.
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		for _, rs := range rss.Items {
			if rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0 {
				assert.Equalf(t, *rs.Spec.Replicas, rs.Status.Replicas, "ReplicaSet %s created all its pods", rs.Name)
			}
		}
		evs, err := cs.CoreV1().Events(ns).List(ctxT(t, time.Minute), metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		require.NoError(t, err)
		for _, e := range evs.Items {
			t.Errorf("%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	})
}

func podsOf(t *testing.T, c *testCluster, ns string) []corev1.Pod {
	t.Helper()
	list, err := c.Clientset.CoreV1().Pods(ns).List(ctxT(t, time.Minute), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + releaseName + ",app.kubernetes.io/name=polyaxon"})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items, "pods of the release in %s", ns)
	return list.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func unschedulableReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return "pending"
}
