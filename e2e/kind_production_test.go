package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/gatewayapi"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// kindProbe is a pod's program: one TCP connection (or HTTP GET) per target, a line each. An
// http target is tried for up to 90 s until it answers: the CNI applies a new pod's policies
// (its address in the sets the others' rules match) a moment after the pod starts, and a
// connection made before that proves nothing either way; the other targets are tried after it.
const kindProbe = `import socket, sys, time, urllib.error, urllib.request
def once(target):
    if target.startswith("http"):
        try:
            with urllib.request.urlopen(target, timeout=5) as r:
                return "open %d" % r.status
        except urllib.error.HTTPError as e:
            if e.code >= 500:  # not serving yet: try again
                raise
            return "open %d" % e.code
    host, port = target.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=5).close()
    return "open"
targets = [a.split("=", 1) for a in sys.argv[1:]]
for name, target in sorted(targets, key=lambda t: not t[1].startswith("http")):
    deadline = time.time() + (90 if target.startswith("http") else 0)
    while True:
        try:
            print(name, once(target), flush=True)
            break
        except Exception as e:
            if time.time() < deadline:
                time.sleep(3)
                continue
            print(name, "blocked", type(e).__name__, e, flush=True)
            break
`

// TestProductionOnKind (issue 39 item 3): on kind, with real kubelets, real containers of the
// images built here (make kind-images) and kube-router enforcing NetworkPolicy:
//   - `install --profile production` brings every platform pod to Running and Ready on the
//     core node;
//   - a run pod in the runs' namespace reaches Polyaxon's API through the gateway Service but
//     opens no TCP connection to Postgres, Redis or the agent, each of which the platform
//     reaches; a run pod that references a platform Secret never starts;
//   - the README's flow with Polyaxon's own CLI: a project, hello-job.yaml run on the
//     experiments node, its log read back with `polyaxon ops logs`;
//   - Traefik, in a pod, accepts the chart's HTTPRoute and serves the API, a request streamed
//     for 15 s and the web UI (in headless Chromium) over https, through the gateway's
//     NetworkPolicy;
//   - an upgrade to the next Polyaxon version backs the database up and verifies it, runs the
//     migration Job once, and every pod serves the new version with the run still there;
//   - a Prometheus built here scrapes the release through its ServiceMonitor, every target up,
//     and the API-down and Postgres-down alerts fire and clear (kindMetricsScenario).
//
// Without the private engine and its images (make test builds them on a machine that can run
// kind's nodes) it is skipped and says so; E2E_PROVIDER=kind makes that an error.
func TestProductionOnKind(t *testing.T) {
	t.Parallel()
	p, images := kindScenarioSetup(t)
	ctx := context.Background()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	deployBinary(t) // built before the cluster, which is created for this test alone

	name := cluster.UniqueName("e2e-kind")
	start := time.Now()
	c, err := p.Create(ctx, name, cluster.WithNodePools(kind.Pools()...), cluster.WithTimeout(10*time.Minute))
	// Deleted once, by whichever cleanup runs first: the one registered now, for a failure
	// before the share is taken, or the one registered after takeShare, which runs before the
	// share is given back (cleanups run last registered first). KIND_RETAIN=1 keeps the nodes.
	var deleteOnce sync.Once
	deleteCluster := func() {
		deleteOnce.Do(func() {
			if os.Getenv("KIND_RETAIN") == "1" {
				t.Logf("kind cluster %s kept (KIND_RETAIN=1)", name)
				return
			}
			start := time.Now()
			assert.NoError(t, p.Delete(context.Background(), name))
			t.Logf("kind cluster %s: deleted in %s", name, time.Since(start).Round(time.Second))
		})
	}
	t.Cleanup(deleteCluster)
	require.NoError(t, err)
	t.Logf("kind cluster %s: a control plane and %d pool nodes created in %s", name, len(kind.Pools()), time.Since(start).Round(time.Second))

	// The next Polyaxon version's images are this one's programs under its tag: the upgrade
	// below needs images it cannot pull, and what it proves (backup, migration Job, roll) does
	// not depend on new code in them.
	next := nextVersion(t, 1)
	images = append(images, retagPolyaxonImages(t, images, installedVersion(t), next)...)
	// polyaxon-deploy's image (the chart's exporter) is tagged with the chart's version, which
	// the upgrade's chart copy takes from the next Polyaxon version.
	const deployImage = "ghcr.io/polyaxon-deploy/polyaxon-deploy"
	images = append(images, retag(t, imageOf(t, images, deployImage), deployImage+":"+next))
	// The run images go to the experiments node only: no build runs here (the builds node is
	// there for the production profile's placement checks).
	// Prometheus and kube-state-metrics run on the builds node, off the core node's CPU.
	monitoringImages := []string{imageOf(t, images, "polyaxon-deploy/prometheus"), imageOf(t, images, "polyaxon-deploy/kube-state-metrics")}
	sets := kind.ImagesByPool(slices.DeleteFunc(slices.Clone(images), func(img string) bool { return slices.Contains(monitoringImages, img) }))
	for i := range sets {
		if slices.Contains(sets[i].Pools, cluster.PoolExperiments) {
			sets[i].Pools = []string{cluster.PoolExperiments}
		}
	}
	sets = append(sets, kind.Images{Images: monitoringImages, Pools: []string{cluster.PoolBuilds}})
	start = time.Now()
	require.NoError(t, p.LoadImages(ctx, c, sets...))
	t.Logf("loaded %d images into the nodes in %s", len(images), time.Since(start).Round(time.Second))
	// Creating the nodes and loading their images is mostly the disk's work: the share of the
	// machine is taken for what follows, Polyaxon's programs.
	takeShare(t, rank{share: kindCluster, longest: true})
	t.Cleanup(deleteCluster)

	// The Gateway's data plane, Traefik, in a pod on the core node: the route below goes through
	// it, and the gateway's NetworkPolicy must admit it for kube-router to let it through.
	require.NoError(t, gatewayapi.InstallCRDs(ctx, c, traefik.get(t).CRDs))
	gw, err := gatewayapi.StartInCluster(ctxT(t, 5*time.Minute), c, imageOf(t, images, "traefik"),
		gatewayapi.Options{Dir: t.TempDir(), NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}})
	require.NoError(t, err)

	// The Prometheus Operator's CRDs: the release's ServiceMonitor and PrometheusRule go through
	// their schemas.
	monitoring, err := cluster.EnsureMonitoring(ctxT(t, 15*time.Minute), nil)
	require.NoError(t, err)
	installMonitoringCRDs(t, c, monitoring.CRDs)

	ns, runs := nsInstall, nsRuns
	values := filepath.Join(root, "values", "kind-demo.yaml")
	// The route and its parent; the edge stays off: this is the Gateway's path to the platform
	// (TestEdge puts the edge between).
	route := []string{"--set", "httpRoute.enabled=true", "--set", "edge.enabled=false",
		"--set", "httpRoute.parentRefs[0].name=" + gw.Name, "--set", "httpRoute.parentRefs[0].namespace=" + gw.Namespace,
		"--set", "httpRoute.parentRefs[0].sectionName=" + gw.Listener, "--set", "httpRoute.hostnames[0]=localhost"}
	// The chart's metrics, scraped by a Prometheus at the end; scheduled backups onto a claim.
	route = append(route, metricsSets...)
	route = append(route, kindScheduledBackupSets(t, c, ns)...)
	start = time.Now()
	res := startDeploy(t, append([]string{"install", "--profile", "production", "--kubeconfig", c.KubeconfigPath, "-n", ns,
		"-f", values, "--timeout", "20m", "-o", "json"}, route...)...).wait(t, 25*time.Minute)
	require.Equal(t, 0, res.Code, "install: %s", res)
	t.Logf("install --profile production: %s", time.Since(start).Round(time.Second))
	cs := c.Clientset

	t.Run("the experiments node offers its GPUs and keeps what does not tolerate them away", func(t *testing.T) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: cluster.PoolLabel + "=" + cluster.PoolExperiments})
		require.NoError(t, err)
		require.Len(t, nodes.Items, 1)
		n := nodes.Items[0]
		assert.Contains(t, n.Spec.Taints, cluster.GPUTaint)
		gpus := n.Status.Capacity[cluster.GPUResource]
		assert.Equal(t, int64(4), gpus.Value(), "nvidia.com/gpu advertised on %s", n.Name)
	})

	t.Run("every platform pod is Running and Ready on the core node", func(t *testing.T) {
		pools := nodePools(t, cs)
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items)
		for _, pod := range pods.Items {
			assert.Equalf(t, cluster.PoolCore, pools[pod.Spec.NodeName], "pod %s on node %s", pod.Name, pod.Spec.NodeName)
			if pod.Status.Phase == corev1.PodSucceeded { // the install's migration Job
				continue
			}
			assert.Equalf(t, corev1.PodRunning, pod.Status.Phase, "pod %s", pod.Name)
			for _, st := range pod.Status.ContainerStatuses {
				assert.Truef(t, st.Ready, "pod %s container %s ready", pod.Name, st.Name)
				assert.Zerof(t, st.RestartCount, "pod %s container %s restarted", pod.Name, st.Name)
			}
		}
	})

	t.Run("a run pod reaches the API but not Postgres, Redis, the agent or a metrics port, which the platform reaches", func(t *testing.T) {
		kindNetworkChecks(t, c, ns, runs)
	})

	t.Run("a run pod that references a platform Secret does not start", func(t *testing.T) {
		pod := kindRunPod("secret-reader", []string{"sh", "-c", "cat /secret/* ; sleep 5"})
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "platform", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: releaseName + "-platform"}}})
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "platform", MountPath: "/secret"}}
		_, err := cs.CoreV1().Pods(runs).Create(ctx, pod, metav1.CreateOptions{})
		require.Error(t, err, "the runs' admission policy refuses a run pod that mounts a platform Secret")
		assert.Contains(t, err.Error(), releaseName+"-platform")
		t.Logf("refused by the API server: %v", err)
	})

	venv, _ := polyaxonPrograms(t)
	gateway := kindPortForward(t, c, ns, "svc/"+releaseName+"-gateway", 80)
	cli := newPolyaxonCLI(t, venv, gateway)
	cliCtx := ctxT(t, 15*time.Minute)
	var uuid string
	t.Run("a run from the README's polyaxonfile executes on the experiments node and its log reaches polyaxon ops logs", func(t *testing.T) {
		_, err := cli.run(cliCtx, "project", "create", "--name", "demo")
		require.NoError(t, err)
		uuid = cli.submit(t, cliCtx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "demo")
		cli.waitStatus(t, cliCtx, "demo", uuid, "succeeded")
		pods, err := cs.CoreV1().Pods(runs).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items, "the run's pod in %s", runs)
		pools := nodePools(t, cs)
		for _, pod := range pods.Items {
			assert.Equalf(t, cluster.PoolExperiments, pools[pod.Spec.NodeName], "run pod %s on node %s", pod.Name, pod.Spec.NodeName)
			kindNativeSidecarEnded(t, ctx, cs, pod)
		}
		var logs string
		waitFor(t, 3*time.Minute, "the run's log through polyaxon ops logs", func(ctx context.Context) (bool, string, error) {
			out, err := cli.run(ctx, "ops", "logs", "-p", "demo", "-uid", uuid)
			logs = out
			return err == nil && strings.Contains(out, "hello from a polyaxon job"), lastLines(out, 5), nil
		})
		t.Logf("polyaxon ops logs -uid %s:\n%s", uuid, lastLines(logs, 5))
	})

	// Issue 52, with real containers and kube-router: what a run sends to Polyaxon's own routes.
	t.Run("a run pod gets nothing of the platform's through the gateway's HTTP routes", func(t *testing.T) {
		require.NotEmpty(t, uuid, "the run above")
		kindHostileHTTP(t, c, ns, runs, uuid)
	})

	t.Run("Traefik in the cluster accepts the chart's HTTPRoute and serves the API and the web UI over https", func(t *testing.T) {
		require.NotEmpty(t, uuid, "the run above")
		dyn, err := dynamic.NewForConfig(c.RESTConfig)
		require.NoError(t, err)
		var status string
		waitFor(t, 2*time.Minute, "the route Accepted and ResolvedRefs by Traefik", func(ctx context.Context) (bool, string, error) {
			r, err := dyn.Resource(gatewayapi.HTTPRoutesGVR).Namespace(ns).Get(ctx, releaseName+"-gateway", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ok := true
			status = ""
			for _, typ := range []string{"Accepted", "ResolvedRefs"} {
				cond := gatewayapi.RouteParentCondition(r, gatewayapi.ControllerName, gw.Namespace, gw.Name, typ)
				status += fmt.Sprintf("%s=%v (%v) ", typ, cond["status"], cond["reason"])
				ok = ok && cond != nil && cond["status"] == "True"
			}
			return ok, status, nil
		})
		t.Logf("route %s/%s-gateway, parent %s/%s: %s", ns, releaseName, gw.Namespace, gw.Name, status)

		local := kindPortForward(t, c, gw.Namespace, "svc/traefik", 8443)
		url := strings.Replace(local, "http://127.0.0.1", "https://localhost", 1)
		client := resendingClient(gw.Client()) // trusts the Gateway's CA, and nothing else
		var installation struct {
			Version string `json:"version"`
		}
		var resp *http.Response
		waitFor(t, 2*time.Minute, "haupt's API through the Gateway over https", func(ctx context.Context) (bool, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/installation", nil)
			if err != nil {
				return false, "", err
			}
			resp, err = client.Do(req)
			if err != nil {
				return false, err.Error(), nil
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, resp.Status, nil
			}
			return true, "", json.NewDecoder(resp.Body).Decode(&installation)
		})
		assert.Equal(t, installedVersion(t), installation.Version, "haupt of the chart's appVersion answers behind the Gateway")
		require.NotNil(t, resp.TLS, "served over TLS")
		assert.Equal(t, []string{"localhost"}, resp.TLS.PeerCertificates[0].DNSNames, "the Gateway's certificate")
		var run struct {
			Status string `json:"status"`
		}
		require.NoError(t, getJSON(client, url+"/api/v1/default/demo/runs/"+uuid, &run))
		assert.Equal(t, "succeeded", run.Status, "the run, through the Gateway")

		// A request whose body takes 15 s stays open through the Gateway: Traefik forwards a
		// chunked body as it comes, and Django's ASGI handler answers after the last chunk.
		elapsed, code, body := streamedPost(t, client, url+"/api/v1/installation", 15)
		t.Logf("POST (chunked, 15 s) %s/api/v1/installation: %d %s after %s", url, code, body, elapsed.Round(100*time.Millisecond))
		assert.GreaterOrEqual(t, elapsed, 14*time.Second, "the answer came before the body was sent")
		assert.Equal(t, http.StatusMethodNotAllowed, code, "haupt's own answer to a POST of the installation")

		browser := headlessChromiumTrusting(t, resp.TLS.PeerCertificates[0])
		page := openWebUI(t, browser, url+"/ui/default/demo/runs", 3*time.Minute, []string{"hello", uuid[:8]}, []string{"/ui/default/demo/runs/" + uuid})
		t.Logf("%s/ui/default/demo/runs in headless Chromium, through Traefik: %q", url, lastLines(page.Text, 6))
	})

	t.Run("a Job of the backup CronJob keeps a sealed backup on its claim, in polyaxon-deploy's image with its own rights", func(t *testing.T) {
		kindScheduledBackup(t, c, ns)
	})

	var bucketStore *s3store.Store
	t.Run("the S3 store runs on kind, and a Job of the backup CronJob keeps a sealed backup in its bucket", func(t *testing.T) {
		bucketStore = kindScheduledBackupToABucket(t, c, ns, imageOf(t, images, s3store.ImageRepository))
	})

	// The upgrade also makes a bucket of that store the artifacts store (issue 56): the run
	// below it is the first on a bucket with real kubelets and NetworkPolicies.
	t.Run("an upgrade backs the database up, migrates once and serves the next version with the run kept", func(t *testing.T) {
		backups := t.TempDir()
		sets := slices.Clone(route)
		if bucketStore != nil {
			sets = append(sets, kindArtifactsBucket(t, c, bucketStore, ns, runs)...)
		}
		start := time.Now()
		res := startDeploy(t, append([]string{"upgrade", "--profile", "production", "--kubeconfig", c.KubeconfigPath, "-n", ns,
			"-f", values, "--chart", bumpedChart(t, next), "--backup-dir", backups, "--timeout", "20m", "-o", "json"}, sets...)...).wait(t, 25*time.Minute)
		require.Equal(t, 0, res.Code, "upgrade: %s", res)
		t.Logf("upgrade to %s: %s", next, time.Since(start).Round(time.Second))
		var d upgradeData
		res.data(t, &d)
		for _, p := range []string{"backup", "verify backup", "migrate", "apply"} {
			i := d.phaseIndex(p)
			require.GreaterOrEqualf(t, i, 0, "phase %q in %+v", p, d.Phases)
			assert.Equalf(t, "ok", d.Phases[i].Status, "phase %q", p)
		}
		m, err := backup.ReadManifest(d.BackupDir)
		require.NoError(t, err)
		t.Logf("backup %s: %s, %d tables", d.BackupDir, m.Layout(), len(m.Rows))
		assert.Equal(t, int64(1), m.Rows["public.db_run"], "the backup holds the run (rows: %v)", m.Rows)

		job, err := cs.BatchV1().Jobs(ns).Get(ctx, migrationJobName(next), metav1.GetOptions{})
		require.NoError(t, err, "the migration Job of %s", next)
		assert.NotNil(t, job.Status.CompletionTime, "the migration Job completed")
		jobPods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		require.NoError(t, err)
		assert.Len(t, jobPods.Items, 1, "the migration ran once")

		requireWorkloadsReady(t, cs, ns, 5*time.Minute)
		requireImagesAt(t, cs, ns, next)
		after := newPolyaxonCLI(t, venv, kindPortForward(t, c, ns, "svc/"+releaseName+"-gateway", 80))
		var run struct {
			UUID   string `json:"uuid"`
			Status string `json:"status"`
		}
		waitFor(t, 3*time.Minute, "the run through the upgraded API", func(ctx context.Context) (bool, string, error) {
			err := after.get(ctx, "/api/v1/default/demo/runs/"+uuid, &run)
			return err == nil, fmt.Sprint(err), nil
		})
		assert.Equal(t, "succeeded", run.Status)
	})

	t.Run("on the bucket, a run's native sidecar uploads its outputs past the runs' NetworkPolicy", func(t *testing.T) {
		require.NotNil(t, bucketStore, "the S3 store above")
		requireWorkloadsReady(t, cs, ns, 5*time.Minute)
		cli := newPolyaxonCLI(t, venv, kindPortForward(t, c, ns, "svc/"+releaseName+"-gateway", 80))
		kindRunOutputsInTheBucket(t, c, cli, bucketStore, runs)
	})

	// Issue 53, with real kubelets: every hostile polyaxonfile ends failed with the API server's
	// reason, those refused at their pod (Pod Security) as well. Last, in a project of its own:
	// the web UI and the upgrade above count the demo project's one run.
	t.Run("hostile polyaxonfiles are refused with their reason in the run's status", func(t *testing.T) {
		requireWorkloadsReady(t, cs, ns, 5*time.Minute)
		hostile := newPolyaxonCLI(t, venv, kindPortForward(t, c, ns, "svc/"+releaseName+"-gateway", 80))
		ctx := ctxT(t, 15*time.Minute)
		_, err := hostile.run(ctx, "project", "create", "--name", "hostile")
		require.NoError(t, err)
		assertHostilePolyaxonfilesRefused(t, ctx, hostile, cs, ns, runs, "hostile", filepath.Join(root, "e2e", "testdata", "polyaxonfiles", "hostile"))
	})
	// Last: it stops the gateway and Postgres for a while.
	t.Run("Prometheus scrapes the release through its ServiceMonitor, and the API-down and Postgres-down alerts fire and clear", func(t *testing.T) {
		requireWorkloadsReady(t, cs, ns, 5*time.Minute)
		kindMetricsScenario(t, c, ns, images)
	})
}

// kindCluster is the kind scenario's share once its nodes are up: Polyaxon's programs, in a
// cluster of real kubelets and containers. It is the suite's longest scenario (about 8 minutes
// on a quiet machine), so it goes first among its share.
const kindCluster = realPrograms

// kindScenarioSetup is the offline kind provider and the chart's images, built or reused by
// build-kind-images.sh; without them the test is skipped, saying why and writing it to the
// kind report make test prints, unless E2E_PROVIDER=kind makes it an error.
func kindScenarioSetup(t *testing.T) (*kind.Provider, []string) {
	t.Helper()
	// The kind library and the docker CLI read the engine's address from the environment; this
	// is the package's only test that uses Docker, and it runs in parallel (no t.Setenv).
	if os.Getenv("DOCKER_HOST") == "" {
		require.NoError(t, os.Setenv("DOCKER_HOST", kind.OfflineDockerHost))
	}
	var wanted bool
	switch v := os.Getenv(kindProviderEnv); v {
	case "kind":
		wanted = true
	case "", "local":
	default:
		t.Fatalf("%s=%q: want kind or local", kindProviderEnv, v)
	}
	notTested := func(err error) {
		if wanted {
			t.Fatalf("%s=kind, but the kind scenario cannot run: %v", kindProviderEnv, err)
		}
		kindReport(t, "e2e: kind NOT tested: %v; every scenario ran on the local provider (%s=kind makes this an error)", err, kindProviderEnv)
		t.Skip(err)
	}
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	// The script first checks that this machine can run kind's nodes, and says what is missing.
	out, err := exec.Command("bash", filepath.Join(root, "e2e", "scripts", "build-kind-images.sh"), "polyaxon").Output()
	if err != nil {
		var why string
		if ee, ok := err.(*exec.ExitError); ok {
			why = ": " + lastLines(strings.TrimSpace(string(ee.Stderr)), 8)
		}
		notTested(fmt.Errorf("build-kind-images.sh polyaxon: %w%s", err, why))
	}
	shared := t.TempDir()
	require.NoError(t, os.Chmod(shared, 0o777)) // runs and the gateway write as their own users
	p, err := kind.NewOfflineProvider(context.Background(), kind.WithDataDir(t.TempDir()),
		kind.WithNodeMounts(kindv1alpha4.Mount{HostPath: shared, ContainerPath: "/polyaxon-artifacts"}))
	if err != nil {
		notTested(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && !t.Skipped() {
			kindReport(t, "e2e: kind tested: TestProductionOnKind passed on real kubelets and containers of the images built here")
		}
	})
	return p, strings.Fields(string(out))
}

// kindProviderEnv chooses whether kind must be tested: "kind" makes a machine that cannot run
// the kind scenario an error.
const kindProviderEnv = "E2E_PROVIDER"

// kindReportEnv names a file where the kind scenario writes one line saying whether kind was
// tested: make test prints it, since go test shows nothing of a passing or skipped test.
const kindReportEnv = "POLYAXON_DEPLOY_KIND_REPORT"

func kindReport(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	if p := os.Getenv(kindReportEnv); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(line+"\n"), 0o644))
	}
}

// getJSON decodes the JSON answer of a GET of url that must be 200 OK.
func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// streamedPost POSTs to url a chunked JSON body written a chunk a second for chunks seconds,
// and returns how long the answer took, its status and body.
func streamedPost(t *testing.T, client *http.Client, url string, chunks int) (time.Duration, int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 2*time.Minute), http.MethodPost, url, nil)
	require.NoError(t, err)
	req.GetBody = func() (io.ReadCloser, error) { return chunkedJSON(chunks), nil }
	req.Body, _ = req.GetBody()
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return time.Since(start), resp.StatusCode, string(body)
}

// chunkedJSON is a body of chunks JSON lines written a second apart, of unknown length (so sent
// chunked).
func chunkedJSON(chunks int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		for i := range chunks {
			if _, err := fmt.Fprintf(pw, `{"chunk": %d}`+"\n", i); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
		pw.Close()
	}()
	return pr
}

// imageOf is the image of repository repo in images.
func imageOf(t *testing.T, images []string, repo string) string {
	t.Helper()
	for _, img := range images {
		if r, _, _ := strings.Cut(img, ":"); r == repo {
			return img
		}
	}
	t.Fatalf("no %s image in %v (make kind-images)", repo, images)
	return ""
}

// retagPolyaxonImages tags every polyaxon/* image of version from as version to in the
// engine, and returns the new names.
func retagPolyaxonImages(t *testing.T, images []string, from, to string) []string {
	t.Helper()
	var tagged []string
	for _, img := range images {
		repo, tag, _ := strings.Cut(img, ":")
		if !strings.HasPrefix(repo, "polyaxon/") || tag != from {
			continue
		}
		tagged = append(tagged, retag(t, img, repo+":"+to))
	}
	require.NotEmpty(t, tagged, "polyaxon images at %s in %v", from, images)
	return tagged
}

// retag tags image img as to in the Docker engine, and returns to.
func retag(t *testing.T, img, to string) string {
	t.Helper()
	out, err := exec.Command("docker", "tag", img, to).CombinedOutput()
	require.NoError(t, err, "docker tag %s %s: %s", img, to, out)
	return to
}

// kindNetworkChecks: from a gateway pod (the platform) Postgres and Redis answer; from a pod
// shaped as Polyaxon's runs, in the runs' namespace, the API answers through the gateway
// Service while Postgres, Redis and the agent refuse it, kube-router enforcing the chart's
// NetworkPolicies. The agent serves nothing, so the test starts a listener in its container,
// and shows first that the agent's node reaches it: a refusal is then the policy's.
func kindNetworkChecks(t *testing.T, c *cluster.Cluster, ns, runs string) {
	cs := c.Clientset
	ctx := context.Background()
	agentIP := podIP(t, cs, ns, "app.kubernetes.io/component=agent")
	pg := fmt.Sprintf("%s-postgresql.%s.svc.cluster.local:5432", releaseName, ns)
	redis := fmt.Sprintf("%s-redis.%s.svc.cluster.local:6379", releaseName, ns)
	// Runs reach the gateway on its runs' port (8003), never its users' (80), whose streams
	// serve every project's files.
	api := fmt.Sprintf("http://%s-gateway.%s.svc.cluster.local:8003/healthz/", releaseName, ns)
	usersPort := fmt.Sprintf("%s-gateway.%s.svc.cluster.local:80", releaseName, ns)
	const agentPort = "9753"
	agent := agentIP + ":" + agentPort
	_, err := kubectlExec(c, ns, "deploy/"+releaseName+"-agent", "sh", "-c",
		`nohup python -c 'import socket, time; s = socket.socket(); s.bind(("0.0.0.0", `+agentPort+`)); s.listen(8); time.sleep(3600)' >/dev/null 2>&1 &`)
	require.NoError(t, err)
	out, err := kubectlExec(c, ns, "deploy/"+releaseName+"-agent", "python", "-c", kindProbe, "agent="+agent)
	require.NoError(t, err, out)
	require.Contains(t, out, "agent open", "the agent's own listener answers in its pod")

	out, err = kubectlExec(c, ns, "deploy/"+releaseName+"-gateway", "python", "-c", kindProbe, "postgres="+pg, "redis="+redis)
	require.NoError(t, err, out)
	t.Logf("a gateway pod's connections:\n%s", out)
	for _, target := range []string{"postgres", "redis"} {
		assert.Contains(t, out, target+" open", "the gateway reaches %s", target)
	}

	// The metrics ports (metricsSets) admit Prometheus's namespace only.
	metricsPorts := map[string]string{}
	for component, port := range map[string]int{"postgresql": 9187, "redis": 9121, "operator": 8080, "installer-exporter": 9150} {
		metricsPorts[component+"-metrics"] = fmt.Sprintf("%s-%s-metrics.%s.svc.cluster.local:%d", releaseName, component, ns, port)
	}
	args := []string{"python", "-c", kindProbe, "api=" + api, "gateway-users-port=" + usersPort, "postgres=" + pg, "redis=" + redis, "agent=" + agent}
	for name, addr := range metricsPorts {
		args = append(args, name+"="+addr)
	}
	pod := kindRunPod("probe", args)
	_, err = cs.CoreV1().Pods(runs).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, 5*time.Minute, "the probe run pod ends", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(runs).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, string(p.Status.Phase), nil
	})
	logs, err := cs.CoreV1().Pods(runs).GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	t.Logf("a run pod's connections:\n%s", logs)
	assert.Contains(t, string(logs), "api open 200")
	for _, target := range []string{"gateway-users-port", "postgres", "redis", "agent"} {
		assert.Contains(t, string(logs), target+" blocked", "a run pod opens a connection to %s", target)
	}
	for target := range metricsPorts {
		assert.Contains(t, string(logs), target+" blocked", "a run pod opens a connection to %s", target)
	}
}

// kindHostileHTTP: links to the gateway's secrets in the run's outputs, then hostileRequests
// from a run pod to the gateway Service, and haupt's own ports tried from a run pod.
func kindHostileHTTP(t *testing.T, c *cluster.Cluster, ns, runs, run string) {
	cs := c.Clientset
	// On kind the store is a directory of each node, so a run pod on the experiments node does
	// not share the gateway's: the links a run would write are written by the API container,
	// which mounts the store read-write.
	args := []string{"python", "-c", "import os, sys\nd = sys.argv[1]\nos.makedirs(d, exist_ok=True)\nfor a in sys.argv[2:]:\n    n, target = a.split('=', 1)\n    p = os.path.join(d, n)\n    if os.path.lexists(p): os.remove(p)\n    os.symlink(target, p)\n",
		"/plx-artifacts/" + run + "/outputs"}
	for _, l := range hostileLinks {
		args = append(args, l.name+"="+l.target)
	}
	out, err := kubectlExec(c, ns, "deploy/"+releaseName+"-gateway", args...)
	require.NoError(t, err, out)

	reqs := hostileRequests(ns, runs, "default", "demo", run)
	gateway := fmt.Sprintf("%s-gateway.%s.svc.cluster.local:8003", releaseName, ns) // the runs' port
	gwIP := podIP(t, cs, ns, "app.kubernetes.io/component=gateway")
	logs := kindRunPodOutput(t, cs, runs, kindRunPod("hostile-http", []string{"python", "-c", hostileFromAPod, gateway, hostileArgs(t, reqs)}))
	assertHostileAnswers(t, logs, reqs, platformSecretValues(t, cs, ns))

	// haupt listens on the gateway pod's loopback: its ports are closed to a run, and so is
	// nginx's users' port; nginx's runs' port is open, and serves no run's files.
	// nginx by HTTP first: kindProbe retries it while the new pod's NetworkPolicy is programmed.
	logs = kindRunPodOutput(t, cs, runs, kindRunPod("haupt-ports", []string{"python", "-c", kindProbe,
		"nginx-runs=http://" + gwIP + ":8003/healthz/", "nginx-users=" + gwIP + ":8000", "haupt-api=" + gwIP + ":8001", "haupt-streams=" + gwIP + ":8002",
		"streams-of-a-run=http://" + gwIP + ":8003/streams/v1/" + runs + "/default/demo/runs/" + run + "/artifacts/tree"}))
	t.Logf("a run pod's connections to the gateway pod:\n%s", logs)
	assert.Contains(t, logs, "nginx-runs open 200")
	assert.Contains(t, logs, "nginx-users blocked")
	assert.Contains(t, logs, "haupt-api blocked")
	assert.Contains(t, logs, "haupt-streams blocked")
	assert.Contains(t, logs, "streams-of-a-run open 403", "the run's own project's streams, on the runs' port")
}

// kindRunPodOutput creates pod in runs, waits for it to end and returns its log.
func kindRunPodOutput(t *testing.T, cs kubernetes.Interface, runs string, pod *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().Pods(runs).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, 5*time.Minute, "run pod "+pod.Name+" ends", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(runs).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, string(p.Status.Phase), nil
	})
	logs, err := cs.CoreV1().Pods(runs).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	return string(logs)
}

// kindRunPod is a pod shaped as Polyaxon's runs (their labels, the runs' service account), of
// the init image the run pools hold.
func kindRunPod(name string, command []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a",
			"app.kubernetes.io/part-of": "polyaxon-runs", "app.kubernetes.io/component": "polyaxon-jobs",
			"app.kubernetes.io/managed-by": "polyaxon",
		}, Annotations: map[string]string{"operation.polyaxon.com/kind": "job"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "polyaxon-runs",
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: "polyaxon/polyaxon-init:2.18.0", ImagePullPolicy: corev1.PullNever, Command: command,
			}},
		},
	}
}

func podIP(t *testing.T, cs kubernetes.Interface, ns, selector string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no running pod %s in %s", selector, ns)
	return ""
}

// kubectlExec runs a command in a container of the cluster with the control plane's kubectl
// (build-binaries.sh's).
func kubectlExec(c *cluster.Cluster, ns, target string, args ...string) (string, error) {
	kubectl, err := kubeBinaries()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(kubectl, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath, "-n", ns, "exec", target, "--"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kindNativeSidecarEnded: the run pod's guarded sidecar is a native one, which the kubelet
// stopped after the run's container ended (it cannot ask the API server, which the runs'
// NetworkPolicy keeps it from), and it made its last upload then and exited 0.
func kindNativeSidecarEnded(t *testing.T, ctx context.Context, cs kubernetes.Interface, pod corev1.Pod) {
	t.Helper()
	assertSidecarGuarded(t, pod)
	var state *corev1.ContainerStateTerminated
	for _, st := range pod.Status.InitContainerStatuses {
		if st.Name == "polyaxon-sidecar" {
			state = st.State.Terminated
		}
	}
	if !assert.NotNilf(t, state, "pod %s: the sidecar ended with the run", pod.Name) {
		return
	}
	assert.Zerof(t, state.ExitCode, "pod %s: the sidecar's exit", pod.Name)
	logs, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "polyaxon-sidecar"}).DoRaw(ctx)
	require.NoError(t, err)
	assert.Containsf(t, string(logs), "stopped, after a last upload", "pod %s: the sidecar's log", pod.Name)
	t.Logf("pod %s: the sidecar, a native one, exited %d: %s", pod.Name, state.ExitCode, lastLines(string(logs), 2))
}
