package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// TestPolyaxonRunsThroughTheCLI: `install --profile production` on the local provider, where the
// platform's pods run Polyaxon's own programs (haupt's API, which migrates the database at
// start, the polyaxon agent, and the operator stand-in) with the environment the chart
// renders, and the real Kubeflow training operator runs TFJobs. Polyaxon's own CLI, pointed at
// the gateway Service, creates a project and runs polyaxonfiles: each run goes from the real
// API through the real agent (with its own ServiceAccount's token) and the operator to pods
// that the chart's admission policies place and the real scheduler binds to the category's
// pool, in the runs' own namespace (polyaxon-runs, where the connection's Secret is created
// after the install, as its NOTES say), and its status in the API reaches succeeded (jobs: kwok completes their pods) or
// running (services). Runs that cannot be, fail in Polyaxon with its own message, and nothing
// of the platform restarts.
//
// The broker is off (scheduler.enabled=false): Polyaxon then runs its tasks inline in the API,
// which the local provider runs; RabbitMQ and Celery are not run here.
func TestPolyaxonRunsThroughTheCLI(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns, runsNS := nsInstall, nsRuns
	op := trainingOperator.get(t)
	c := polyaxonCluster(t, "polyaxon", ns)
	venv, _ := polyaxonPrograms(t)
	applyKubeflowCRDs(t, c, op.CRDs, "tfjobs")
	createNamespace(t, c, ns)

	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	files := filepath.Join(root, "e2e", "testdata", "polyaxonfiles")
	store := t.TempDir()
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "operators.tfjob=true", "--set", "auth.enabled=true",
		"-f", filepath.Join(files, "connections-values.yaml"),
		// One store for the gateway and the runs: a directory here stands for an NFS export.
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path="+store,
	).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	t.Run("the gateway's and the runs' artifacts claims are bound to one store", func(t *testing.T) {
		paths := map[string]string{}
		for _, n := range []string{ns, runsNS} {
			pvc, err := c.Clientset.CoreV1().PersistentVolumeClaims(n).Get(ctxT(t, time.Minute), "polyaxon-artifacts", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equalf(t, corev1.ClaimBound, pvc.Status.Phase, "claim polyaxon-artifacts in %s", n)
			pv, err := c.Clientset.CoreV1().PersistentVolumes().Get(ctxT(t, time.Minute), pvc.Spec.VolumeName, metav1.GetOptions{})
			require.NoError(t, err)
			require.NotNil(t, pv.Spec.HostPath, pv.Name)
			paths[n] = pv.Spec.HostPath.Path
		}
		assert.Equal(t, paths[ns], paths[runsNS], "both volumes are the one directory")
	})
	// The connection's Secret, where the runs are (the install's NOTES: kubectl -n polyaxon-runs
	// create secret ...), and the training operator, watching them.
	_, err = c.Clientset.CoreV1().Secrets(runsNS).Create(ctxT(t, time.Minute), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "training-credentials"},
		StringData: map[string]string{"api-key": "not-a-real-key"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	startTrainingOperator(t, c, op.Bin, runsNS, "tfjob")
	platform := platformPods(t, c, ns)

	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	ctx := ctxT(t, 15*time.Minute)

	t.Run("the platform pods run Polyaxon's programs", func(t *testing.T) {
		// Issue 38: the migration Job migrated, once; the gateways did not, and served only
		// after it.
		jobs, err := c.Clientset.BatchV1().Jobs(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=migrations"})
		require.NoError(t, err)
		require.Len(t, jobs.Items, 1, "the install's migration Job")
		job := jobs.Items[0]
		require.NotNilf(t, job.Status.CompletionTime, "migration Job %s did not complete: %+v", job.Name, job.Status)
		jobPods, err := c.Clientset.CoreV1().Pods(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		require.NoError(t, err)
		require.Lenf(t, jobPods.Items, 1, "migration Job %s ran once", job.Name)
		assert.Equal(t, corev1.PodSucceeded, jobPods.Items[0].Status.Phase)
		jobLogs := podLogs(t, c, ns, jobPods.Items[0].Name)
		assert.Containsf(t, jobLogs, "Applying ", "migration Job %s: Django's migrate applied the migrations:\n%s", job.Name, lastLines(jobLogs, 20))
		migrated := lastLogTime(t, c, ns, jobPods.Items[0].Name, "Applying ")
		gateways := 0
		for _, p := range platform {
			if p.Labels["app.kubernetes.io/component"] != "gateway" {
				continue
			}
			gateways++
			logs := podLogs(t, c, ns, p.Name)
			for _, migrated := range []string{"Applying ", "DB Migration finished", "Tables were migrated"} {
				assert.NotContainsf(t, logs, migrated, "gateway %s ran migrations:\n%s", p.Name, lastLines(logs, 20))
			}
			assert.Containsf(t, logs, "The database is migrated: starting the API (it runs no migrations).", "gateway %s:\n%s", p.Name, lastLines(logs, 20))
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady {
					assert.Falsef(t, cond.LastTransitionTime.Time.Before(migrated.Truncate(time.Second)),
						"gateway %s was Ready at %s, before the migration Job applied its last migration (%s)", p.Name, cond.LastTransitionTime, migrated)
				}
			}
		}
		assert.Positive(t, gateways)
		var installation struct {
			Version string `json:"version"`
			Dist    string `json:"dist"`
		}
		require.NoError(t, cli.get(ctx, "/api/v1/installation", &installation))
		assert.Equal(t, installedVersion(t), installation.Version, "the API behind the gateway Service is haupt of the chart's appVersion")
		assert.Equal(t, "ce", installation.Dist)
	})

	_, err = cli.run(ctx, "project", "create", "--name", "demo")
	require.NoError(t, err)

	type run struct {
		file     string
		category string // the run category the chart places it as
		pool     string // the pool its pods land on
		status   string // where its status goes
		pods     int
	}
	runs := []run{
		{file: filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), category: "jobs", pool: cluster.PoolExperiments, status: "succeeded", pods: 1},
		{file: filepath.Join(files, "gpu-job.yaml"), category: "jobs", pool: cluster.PoolExperiments, status: "succeeded", pods: 1},
		{file: filepath.Join(files, "build.yaml"), category: "builds", pool: cluster.PoolBuilds, status: "succeeded", pods: 1},
		{file: filepath.Join(files, "notebook.yaml"), category: "notebooks", pool: cluster.PoolExperiments, status: "running", pods: 1},
		{file: filepath.Join(files, "distributed-tf.yaml"), category: "experiments", pool: cluster.PoolExperiments, status: "running", pods: 4},
	}
	uuids := map[string]string{}
	landed := map[string]string{} // category -> the pool its real runs' pods landed on
	for _, r := range runs {
		name := strings.TrimSuffix(filepath.Base(r.file), ".yaml")
		t.Run(name, func(t *testing.T) {
			uuid := cli.submit(t, ctx, r.file, "demo")
			uuids[name] = uuid
			pods := waitRunPods(t, c, cli, runsNS, uuid, r.pods)
			pools := nodePools(t, c.Clientset)
			for _, p := range pods {
				landed[r.category] = pools[p.Spec.NodeName]
				assert.Equalf(t, r.pool, pools[p.Spec.NodeName], "pod %s of %s runs on the %s pool", p.Name, name, r.pool)
				assert.Truef(t, mountsClaim(p, "polyaxon-artifacts"), "pod %s mounts the artifacts store's claim", p.Name)
				assert.Equalf(t, "polyaxon-runs", p.Spec.ServiceAccountName, "pod %s runs as the runs ServiceAccount", p.Name)
				assertNoUnsetSettings(t, p)
				assertSidecarGuarded(t, p)
			}
			cli.waitStatus(t, ctx, "demo", uuid, r.status)
		})
	}

	t.Run("plan --canary places each category's probe where the real runs landed", func(t *testing.T) {
		var pr plan.Result
		c.deploy(t, "plan", "--canary", "--no-release", "--namespace", ns, "-o", "json").requireExit(t, 0).data(t, &pr)
		pools := nodePools(t, c.Clientset)
		for _, can := range pr.Canary {
			if pool, ok := landed[can.Category]; ok {
				assert.Truef(t, can.Scheduled, "canary %s: %s %s", can.Category, can.Reason, can.Message)
				assert.Equalf(t, pool, pools[can.Node], "the %s canary landed where the category's real runs did", can.Category)
				delete(landed, can.Category)
			}
		}
		assert.Empty(t, landed, "categories of real runs that the canary did not probe")
	})

	t.Run("the GPU job has the connection's Secret at /etc/secrets", func(t *testing.T) {
		require.NotEmpty(t, uuids["gpu-job"], "the GPU job was not submitted")
		pods := waitRunPods(t, c, cli, runsNS, uuids["gpu-job"], 1)
		assert.True(t, mountsSecretAt(pods[0], "training-credentials", "/etc/secrets"), "pod %s: Secret training-credentials at /etc/secrets", pods[0].Name)
	})

	// Issue 52: nginx in front of haupt refuses the store's parent in every spelling and the
	// routes that mint tokens; links in a run's outputs give away no platform Secret.
	t.Run("the gateway's HTTP routes give a run nothing of the platform's", func(t *testing.T) {
		run := uuids["hello-job"]
		require.NotEmpty(t, run, "hello-job was not submitted")
		writeHostileLinks(t, filepath.Join(store, run))
		assertGatewayRefusesHostileRequests(t, addr, hostileRequests(ns, runsNS, "default", "demo", run), platformSecretValues(t, c.Clientset, ns))
		// Writes go to the API, which follows no link under the store either: a delete through
		// a folder link leaves the file it points at.
		canary := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(canary, "canary.txt"), []byte("platform file"), 0o644))
		require.NoError(t, os.Symlink(canary, filepath.Join(store, run, "outputs", "canary-dir")))
		// (Deleting the link itself removes the run's link, not what it points at.)
		for _, path := range []string{"outputs/canary-dir/canary.txt", "outputs/canary-dir"} {
			status, answer, err := rawRequest(ctxT(t, time.Minute), addr, hostileRequest{method: http.MethodDelete,
				target: fmt.Sprintf("/streams/v1/%s/default/demo/runs/%s/artifact?path=%s", runsNS, run, path)})
			require.NoError(t, err)
			t.Logf("DELETE %s: %d", path, status)
			if strings.Count(path, "/") > 1 {
				assert.Truef(t, status >= 400 && status < 500, "DELETE %s answered %d:\n%.300s", path, status, answer)
			}
			assert.FileExistsf(t, filepath.Join(canary, "canary.txt"), "DELETE %s removed the file the run's link points at", path)
		}
		// What the run wrote itself still downloads: streams copies it to its archives, and
		// nginx sends it (X-Accel-Redirect to its internal location).
		want := "weights of run " + run + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(store, run, "outputs", "model.txt"), []byte(want), 0o644))
		for _, route := range []string{"artifact?path=outputs/model.txt", "artifact?path=outputs/model.txt&stream=true", "ro_artifact/outputs/model.txt"} {
			status, answer, err := rawRequest(ctxT(t, time.Minute), addr, hostileRequest{method: http.MethodGet,
				target: fmt.Sprintf("/streams/v1/%s/default/demo/runs/%s/%s", runsNS, run, route)})
			require.NoError(t, err)
			assert.Equalf(t, http.StatusOK, status, "%s:\n%.300s", route, answer)
			assert.Equalf(t, want, string(answerBody(answer)), "%s: the run's own file", route)
		}
	})

	t.Run("bad input fails in Polyaxon with its own message; the platform does not restart", func(t *testing.T) {
		uuid := cli.submit(t, ctx, filepath.Join(files, "unknown-connection.yaml"), "demo")
		msg := cli.waitStatus(t, ctx, "demo", uuid, "failed")
		assert.Contains(t, msg, "no-such-connection", "Polyaxon names the connection it does not know")

		// More GPUs than one node has, fewer than the quota: Pending, and Polyaxon says why.
		uuid = cli.submit(t, ctx, filepath.Join(files, "gpus-beyond-a-node.yaml"), "demo")
		msg = cli.waitStatus(t, ctx, "demo", uuid, "unschedulable")
		assert.Contains(t, msg, "nvidia.com/gpu", "the scheduler's reason reaches Polyaxon")

		// More than the run pools hold twice over (runs.quota, sized from them): the quota
		// refuses the pod, and the run fails with its reason (issue 53).
		uuid = cli.submit(t, ctx, filepath.Join(files, "too-many-gpus.yaml"), "demo")
		msg = cli.waitStatus(t, ctx, "demo", uuid, "failed")
		assert.Contains(t, msg, "exceeded quota: polyaxon-runs, requested: requests.nvidia.com/gpu=64", "the quota's reason reaches Polyaxon")
		t.Logf("too-many-gpus.yaml: %.300s", msg)

		for _, p := range platformPods(t, c, ns) {
			before, ok := platform[p.Name]
			require.Truef(t, ok, "platform pod %s is new: one was replaced", p.Name)
			assert.Equal(t, before.UID, p.UID)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					// What the run before the restart said (a migration race: Django's error).
					prev, _ := c.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true}).DoRaw(ctxT(t, time.Minute))
					assert.Zerof(t, cs.RestartCount, "%s/%s restarted; kubectl logs --previous:\n%s", p.Name, cs.Name, lastLines(string(prev), 20))
				}
			}
		}
	})

	// Issues 37 and 53: what a polyaxonfile asks for that is not a run's is refused by the API
	// server, when the agent creates the run's object or when the Job controller creates its
	// pod, and the refusal is the run's failed status (hostile_polyaxonfiles_test.go).
	t.Run("hostile polyaxonfiles are refused", func(t *testing.T) {
		assertHostilePolyaxonfilesRefused(t, ctx, cli, c.Clientset, ns, runsNS, "demo", filepath.Join(files, "hostile"))
		// Nothing of the platform's is referenced by any pod outside the platform's namespace.
		platformRefs := []string{"polyaxon-platform", "polyaxon-postgresql", "polyaxon-redis", "data-pg16-polyaxon-postgresql-0"}
		pods, err := c.Clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.Namespace == ns {
				continue
			}
			for _, ref := range podReferences(&p) {
				assert.NotContainsf(t, platformRefs, ref, "pod %s/%s references %s", p.Namespace, p.Name, ref)
			}
		}
	})

	t.Run("the agent acts with its own ServiceAccount's rights", func(t *testing.T) {
		// Without create on polyaxon.com jobs in its Role, the agent's submission is refused by
		// the API server, and the agent says so: it holds no other credentials.
		roles := c.Clientset.RbacV1().Roles(runsNS)
		role, err := roles.Get(ctx, "polyaxon-agent", metav1.GetOptions{})
		require.NoError(t, err)
		orig := role.DeepCopy()
		for i, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "polyaxon.com") {
				role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "create" })
			}
		}
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
		uuid := cli.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "demo")
		agent := componentPod(t, c, ns, "agent")
		waitFor(t, 2*time.Minute, "the agent's 403", func(ctx context.Context) (bool, string, error) {
			logs := podLogsCtx(ctx, c, ns, agent)
			return strings.Contains(logs, "403") && strings.Contains(logs, "forbidden"), lastLines(logs, 5), nil
		})
		for _, line := range strings.Split(podLogs(t, c, ns, agent), "\n") {
			if strings.Contains(line, "403") {
				t.Logf("the agent without create on its custom resources: %.400s", line)
				break
			}
		}
		restoreRole(t, c, orig)
		_ = uuid
	})

	t.Run("the agent needs POLYAXON_HOST from its ConfigMap", func(t *testing.T) {
		// Without it the agent calls Polyaxon's default, http://localhost:8000, where no API
		// is: Polyaxon's own connection error is in its log, and a run is never submitted.
		cms := c.Clientset.CoreV1().ConfigMaps(ns)
		cm, err := cms.Get(ctx, "polyaxon-agent", metav1.GetOptions{})
		require.NoError(t, err)
		host := cm.Data["POLYAXON_HOST"]
		require.NotEmpty(t, host)
		delete(cm.Data, "POLYAXON_HOST")
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		restartAgent(t, c, ns)
		agent := componentPod(t, c, ns, "agent")
		waitFor(t, 2*time.Minute, "the agent's connection error", func(ctx context.Context) (bool, string, error) {
			logs := podLogsCtx(ctx, c, ns, agent)
			return strings.Contains(logs, "localhost") && strings.Contains(strings.ToLower(logs), "connect"), lastLines(logs, 5), nil
		})
		t.Logf("the agent without POLYAXON_HOST:\n%s", lastLines(podLogs(t, c, ns, agent), 6))

		cm, err = cms.Get(ctx, "polyaxon-agent", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data["POLYAXON_HOST"] = host
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		restartAgent(t, c, ns)
		requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	})

	// The API migrated at start (above); TestPolyaxonVersionUpgrade's upgrade runs the migrations Job.
	t.Run("the install's hook created the admin user through Polyaxon's own command", func(t *testing.T) {
		// The hook's createuser wrote the admin user with the password the chart keeps.
		secret, err := c.Clientset.CoreV1().Secrets(ns).Get(ctx, "polyaxon-platform", metav1.GetOptions{})
		require.NoError(t, err)
		password := string(secret.Data["POLYAXON_ADMIN_PASSWORD"])
		require.NotEmpty(t, password)
		out, err := c.pg.Psql(ctx, "polyaxon", "SELECT password FROM db_user WHERE username = 'admin' AND is_superuser")
		require.NoError(t, err)
		hash := strings.TrimSpace(out)
		require.NotEmpty(t, hash, "no superuser admin in db_user")
		ok, err := checkDjangoPassword(password, hash)
		require.NoError(t, err)
		assert.True(t, ok, "the admin user's password is the one kept in the platform Secret")
	})
}

// jobPodLogs are the logs of the pod of the release's Job of a component.
func jobPodLogs(t *testing.T, c *testCluster, ns, component string) string {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctxT(t, time.Minute), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + releaseName + ",app.kubernetes.io/component=" + component})
	require.NoError(t, err)
	require.NotEmptyf(t, pods.Items, "no pod of the %s Job", component)
	return podLogs(t, c, ns, pods.Items[len(pods.Items)-1].Name)
}

// restartAgent deletes the agent's pod and waits for its replacement to be Ready, as
// `kubectl rollout restart` would (the ConfigMap is read at start).
func restartAgent(t *testing.T, c *testCluster, ns string) {
	old := componentPod(t, c, ns, "agent")
	require.NoError(t, c.Clientset.CoreV1().Pods(ns).Delete(ctxT(t, time.Minute), old, metav1.DeleteOptions{}))
	waitFor(t, 2*time.Minute, "a new agent pod", func(ctx context.Context) (bool, string, error) {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods.Items {
			if p.Name != old && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				return true, "", nil
			}
		}
		return false, "", nil
	})
}

// lastLogTime is the time kubectl logs --timestamps gives the last line of pod containing text.
func lastLogTime(t *testing.T, c *testCluster, ns, pod, text string) time.Time {
	b, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod, firstContainer(ctxT(t, time.Minute), c.Clientset, ns, pod, &corev1.PodLogOptions{Timestamps: true})).DoRaw(ctxT(t, time.Minute))
	require.NoError(t, err)
	var last time.Time
	for _, line := range strings.Split(string(b), "\n") {
		if stamp, rest, ok := strings.Cut(line, " "); ok && strings.Contains(rest, text) {
			last, err = time.Parse(time.RFC3339Nano, stamp)
			require.NoError(t, err, line)
		}
	}
	require.Falsef(t, last.IsZero(), "pod %s logged no %q", pod, text)
	return last
}

// createNamespace creates ns when missing.
func createNamespace(t *testing.T, c *testCluster, ns string) {
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctxT(t, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func restoreRole(t *testing.T, c *testCluster, orig *rbacv1.Role) {
	roles := c.Clientset.RbacV1().Roles(orig.Namespace)
	cur, err := roles.Get(ctxT(t, time.Minute), orig.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cur.Rules = orig.Rules
	_, err = roles.Update(ctxT(t, time.Minute), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// platformPods are the release's pods by name (run pods excluded).
func platformPods(t *testing.T, c *testCluster, ns string) map[string]corev1.Pod {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
	require.NoError(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			out[p.Name] = p
		}
	}
	return out
}

// componentPod is the name of the running pod of a release component.
func componentPod(t *testing.T, c *testCluster, ns, component string) string {
	for name, p := range platformPods(t, c, ns) {
		if p.Labels["app.kubernetes.io/component"] == component {
			return name
		}
	}
	t.Fatalf("no running %s pod in %s", component, ns)
	return ""
}

// podLogs is `kubectl logs` of a pod's first container.
func podLogs(t *testing.T, c *testCluster, ns, pod string) string {
	return podLogsCtx(ctxT(t, time.Minute), c, ns, pod)
}

func podLogsCtx(ctx context.Context, c *testCluster, ns, pod string) string {
	b, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod, firstContainer(ctx, c.Clientset, ns, pod, &corev1.PodLogOptions{})).DoRaw(ctx)
	if err != nil {
		return "logs: " + err.Error()
	}
	return string(b)
}

// firstContainer names the pod's first container in opts, as `kubectl logs` picks it: the API
// server wants a container for a pod of several (the gateway's API, streams and proxy).
func firstContainer(ctx context.Context, cs kubernetes.Interface, ns, pod string, opts *corev1.PodLogOptions) *corev1.PodLogOptions {
	if opts.Container == "" {
		if p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); err == nil && len(p.Spec.Containers) > 0 {
			opts.Container = p.Spec.Containers[0].Name
		}
	}
	return opts
}

// runCreatedRE is how the CLI names the run it created: owner/project:name@uuid.
var runCreatedRE = regexp.MustCompile(`A new run was created: \S+@([0-9a-f]{32})`)

// submit runs `polyaxon run -f file -p project [args]` and returns the run's uuid.
func (p *polyaxonCLI) submit(t *testing.T, ctx context.Context, file, project string, args ...string) string {
	t.Helper()
	out, err := p.run(ctx, append([]string{"run", "-f", file, "-p", project}, args...)...)
	require.NoError(t, err)
	m := runCreatedRE.FindStringSubmatch(out)
	require.NotNilf(t, m, "polyaxon run printed no run uuid:\n%s", out)
	return m[1]
}

// waitStatus waits until the run's status in the API is want and returns the message of its
// last condition; a run that ends in another status fails at once with its conditions.
func (p *polyaxonCLI) waitStatus(t *testing.T, ctx context.Context, project, uuid, want string) string {
	t.Helper()
	var msg string
	waitFor(t, 4*time.Minute, "run "+uuid+" "+want, func(ctx context.Context) (bool, string, error) {
		st, conds, err := p.statuses(ctx, project, uuid)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range conds {
			if c.Type == want {
				msg = c.Message
			}
		}
		if st == want {
			return true, "", nil
		}
		if terminal(st) {
			return false, "", fmt.Errorf("run %s ended %s, want %s: %s", uuid, st, want, conds)
		}
		return false, conds.String(), nil
	})
	return msg
}

// runConditions are a run's status conditions as Polyaxon's API lists them.
type runConditions []struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (cs runConditions) String() string {
	var seen []string
	for _, c := range cs {
		seen = append(seen, c.Type+" ("+c.Reason+": "+c.Message+")")
	}
	return strings.Join(seen, "; ")
}

// statuses is the run's status and its conditions.
func (p *polyaxonCLI) statuses(ctx context.Context, project, uuid string) (string, runConditions, error) {
	var st struct {
		Status     string        `json:"status"`
		Conditions runConditions `json:"status_conditions"`
	}
	err := p.get(ctx, fmt.Sprintf("/api/v1/default/%s/runs/%s/statuses", project, uuid), &st)
	return st.Status, st.Conditions, err
}

func terminal(status string) bool {
	switch status {
	case "succeeded", "failed", "stopped", "skipped", "upstream_failed", "done":
		return true
	}
	return false
}

// waitRunPods waits for n pods of the run (label app.kubernetes.io/instance=uuid) bound to
// nodes; a run that Polyaxon failed meanwhile fails at once, with Polyaxon's message.
func waitRunPods(t *testing.T, c *testCluster, cli *polyaxonCLI, ns, uuid string, n int) []corev1.Pod {
	t.Helper()
	return waitRunPodsOf(t, c, cli, ns, "demo", uuid, n)
}

// waitRunPodsOf is waitRunPods for a run of project.
func waitRunPodsOf(t *testing.T, c *testCluster, cli *polyaxonCLI, ns, project, uuid string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	waitFor(t, 3*time.Minute, fmt.Sprintf("%d pods of run %s bound", n, uuid), func(ctx context.Context) (bool, string, error) {
		if st, conds, err := cli.statuses(ctx, project, uuid); err == nil && st == "failed" {
			return false, "", fmt.Errorf("Polyaxon failed run %s: %s", uuid, conds)
		}
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
		if err != nil {
			return false, err.Error(), nil
		}
		out = out[:0]
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, p.Name+" "+string(p.Status.Phase)+" on "+p.Spec.NodeName)
			if p.Spec.NodeName != "" {
				out = append(out, p)
			}
		}
		return len(out) >= n, strings.Join(seen, "; "), nil
	})
	return out
}

// assertNoUnsetSettings: the agent's converter writes a setting its config lacks as Python's
// None (runs.sidecar without sleepInterval gave the sidecar --sleep-interval=None, and it
// exited at once on a real kubelet). Polyaxon writes those settings as a container's args;
// its commands are fixed (`polyaxon sidecar`), or the chart's guard program, whose Python
// source has `=None` of its own (the runs' sidecar policy, polyaxon.runs.sidecarGuardCommand).
func assertNoUnsetSettings(t *testing.T, p corev1.Pod) {
	t.Helper()
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		for _, a := range c.Args {
			assert.NotContainsf(t, a, "=None", "pod %s container %s: a setting the agent's config lacks", p.Name, c.Name)
		}
	}
}

// assertSidecarGuarded: on a claim store too, the runs' sidecar policy gives Polyaxon's sidecar
// the chart's guarded command (a link in a run's outputs to another run's folder of the claim
// would be copied as the run's own output), and makes it a native sidecar, which needs no API
// server to know when the run ended.
func assertSidecarGuarded(t *testing.T, p corev1.Pod) {
	t.Helper()
	c, ok := polyaxonSidecar(p)
	if !assert.Truef(t, ok, "pod %s: Polyaxon's sidecar is a native sidecar (an init container restarted Always)", p.Name) {
		return
	}
	assert.Truef(t, len(c.Command) == 3 && c.Command[0] == "python" && strings.Contains(c.Command[2], "sidecar guard"),
		"pod %s: the API server gave the sidecar the chart's guarded command, not %.40q", p.Name, c.Command)
}

// polyaxonSidecar is the pod's polyaxon-sidecar as the runs' mutating policy leaves it: an init
// container restarted Always; ok is false when the pod has none such (or keeps it a container).
func polyaxonSidecar(p corev1.Pod) (corev1.Container, bool) {
	for _, c := range p.Spec.Containers {
		if c.Name == "polyaxon-sidecar" {
			return c, false
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == "polyaxon-sidecar" {
			return c, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return corev1.Container{}, false
}

func mountsClaim(p corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// mountsSecretAt reports whether a container of p mounts Secret secret at path.
func mountsSecretAt(p corev1.Pod, secret, path string) bool {
	vols := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			vols[v.Name] = true
		}
	}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if vols[m.Name] && m.MountPath == path {
				return true
			}
		}
	}
	return false
}

// podReferences are the Secrets, ConfigMaps and claims a pod names, through volumes (projected
// ones included), env, envFrom and pull secrets.
func podReferences(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, v.Secret.SecretName)
		case v.ConfigMap != nil:
			out = append(out, v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					out = append(out, src.ConfigMap.Name)
				}
			}
		}
	}
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				out = append(out, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				out = append(out, e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				out = append(out, e.ConfigMapRef.Name)
			}
		}
	}
	for _, s := range p.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	return out
}
