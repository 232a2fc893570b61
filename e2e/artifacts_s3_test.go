package e2e

import (
	"context"
	"fmt"
	"github.com/chromedp/chromedp"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// TestArtifactsInAnS3Store (issue 56 item 2): the artifacts store in an S3 bucket, end to end on
// the local provider. versitygw runs in the cluster (the s3store add-on) with a bucket owned by
// an account of role user; the release is installed with values/artifacts-s3.yaml and that
// account's keys in Secret polyaxon-s3 (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_ENDPOINT_URL=http://polyaxon-s3.s3:7070, AWS_REGION, AWS_DEFAULT_REGION). A polyaxonfile
// submitted through Polyaxon's CLI runs for real: its pod's main container (this machine's
// Python, local.RunPrograms) writes a file to its outputs, and Polyaxon's own sidecar uploads
// the outputs and the container's logs to the bucket under the run's uuid; haupt's streams
// serve the file back from the bucket through the gateway, the CLI the logs.
//
// Polyaxon keeps every run of every project under <bucket>/<run uuid>/ with one set of keys,
// which go to every run pod's init container and sidecar: a run of another project that asks
// for them (the store as its connection, its own command in the init container, an init of
// this run's outputs) is refused by the runs' admission policy, and the streams' URL of
// another project serves nothing. A run that asks for nothing but leaves a link to the
// sidecar's environment and a file for another run in its context gets neither uploaded: the
// API server gives Polyaxon's sidecar the chart's guarded command.
func TestArtifactsInAnS3Store(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	start := time.Now()
	ns, runsNS := nsInstall, nsRuns
	bin := s3storeBuild.get(t)
	c := polyaxonCluster(t, "s3artifacts", ns, local.WithHostPrograms(append(local.RunPrograms(local.InstalledVenvs), s3store.Program(bin))...))
	venv, _ := polyaxonPrograms(t)
	ctx := ctxT(t, 15*time.Minute)
	t.Cleanup(func() { dumpRunPodsOnFailure(t, c, runsNS) })

	// The store, in a namespace of its own that enforces the restricted Pod Security level.
	const storeNS, bucket = "s3", "polyaxon-artifacts"
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	st, err := s3store.Deploy(ctx, c.Cluster, s3store.Options{Namespace: storeNS, NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}})
	require.NoError(t, err)
	store, err := st.Connect(ctx, s3store.LocalForward(c.Cluster))
	require.NoError(t, err)
	const access, secret = "POLYAXONARTIFACTS001", "artifacts-secret-0123456789abcdef0123456"
	require.NoError(t, store.CreateUser(ctx, access, secret))
	require.NoError(t, store.CreateBucket(ctx, bucket, access))
	client := store.Client(access, secret)
	creds := map[string]string{
		"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": st.Endpoint,
		"AWS_REGION": s3test.Region, "AWS_DEFAULT_REGION": s3test.Region,
	}
	createS3Secret := func(namespace string) {
		_, err := c.Clientset.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-s3"}, StringData: creds}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The release: the Secret first in its namespace (the install checks it), then in the
	// runs' own, which the release creates (its NOTES say so).
	createNamespace(t, c, ns)
	createS3Secret(ns)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"-f", filepath.Join(root, "values", "artifacts-s3.yaml"), "--set", "artifactsStore.bucket=s3://"+bucket,
	).requireExit(t, 0)
	createS3Secret(runsNS)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	t.Logf("the store and the release up in %s", time.Since(start).Round(time.Second))

	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	_, err = cli.run(ctx, "project", "create", "--name", "vision")
	require.NoError(t, err)
	files := filepath.Join(root, "e2e", "testdata", "polyaxonfiles")
	ran := time.Now()
	uuid := cli.submit(t, ctx, filepath.Join(files, "s3-outputs.yaml"), "vision")
	pods := waitRunPodsOf(t, c, cli, runsNS, "vision", uuid, 1)
	cli.waitStatus(t, ctx, "vision", uuid, "succeeded")
	t.Logf("run %s succeeded %s after its submission", uuid, time.Since(ran).Round(100*time.Millisecond))
	want := "weights of default.vision.runs." + uuid + "\n"
	output := uuid + "/outputs/model.txt"

	t.Run("the run's outputs and logs are in the bucket under its uuid, as files of the store", func(t *testing.T) {
		keys := listKeys(t, ctx, client, bucket, "")
		require.Contains(t, keys, output, "the run's output, uploaded by Polyaxon's sidecar")
		logs := uuid + "/plxlogs/" + pods[0].Name + ".jsonl"
		require.Contains(t, keys, logs, "the run's logs")
		for _, k := range keys {
			assert.Truef(t, strings.HasPrefix(k, uuid+"/"), "object %s is not under the run's uuid", k)
		}
		t.Logf("the bucket after the run: %s", strings.Join(keys, ", "))
		assert.Equal(t, want, getObject(t, ctx, client, bucket, output))
		assert.Contains(t, getObject(t, ctx, client, bucket, logs), "wrote ", "the main container's output in the logs object")

		dir, err := st.LocalDataDir(ctx)
		require.NoError(t, err)
		onDisk, err := os.ReadFile(filepath.Join(dir, bucket, filepath.FromSlash(output)))
		require.NoError(t, err, "versitygw keeps the object as a file under its data directory")
		assert.Equal(t, want, string(onDisk))
	})

	t.Run("streams serve the file from the bucket through the gateway, and the CLI the logs", func(t *testing.T) {
		status, body := gatewayGet(t, ctx, addr, fmt.Sprintf("/streams/v1/%s/default/vision/runs/%s/artifact?path=outputs/model.txt", runsNS, uuid))
		assert.Equal(t, http.StatusOK, status, body)
		assert.Equal(t, want, body)
		// The listing the web UI's file tree asks for: the outputs folder, read from the bucket.
		status, body = gatewayGet(t, ctx, addr, fmt.Sprintf("/streams/v1/%s/default/vision/runs/%s/artifacts/tree?path=outputs", runsNS, uuid))
		assert.Equal(t, http.StatusOK, status, body)
		t.Logf("the API's listing of the run's outputs: %s", body)
		assert.Contains(t, body, `"model.txt"`, "the run's output in its outputs folder")
		out, err := cli.run(ctx, "ops", "logs", "-p", "vision", "-uid", uuid)
		require.NoError(t, err)
		assert.Contains(t, out, "wrote ", "polyaxon ops logs of the finished run (read from the bucket)")
	})

	t.Run("the web UI shows the run's files from the bucket", func(t *testing.T) {
		// The folders of the run's file tree, which streams list from the bucket. Waited for in
		// the DOM: on this page a script evaluated right after the navigation (openWebUI's
		// polling) was seen never to answer, while the page had rendered in 2 s.
		began := time.Now()
		tab, cancelTab := chromedp.NewContext(headlessChromium(t))
		defer cancelTab()
		tab, cancel := context.WithTimeout(tab, 2*time.Minute)
		defer cancel()
		url := fmt.Sprintf("http://%s/ui/default/vision/runs/%s/artifacts", addr, uuid)
		require.NoErrorf(t, chromedp.Do(tab, chromedp.Navigate(url),
			chromedp.WaitVisible(`//*[normalize-space(text())="outputs"]`),
			chromedp.WaitVisible(`//*[normalize-space(text())="plxlogs"]`)),
			"%s shows the run's folders outputs and plxlogs", url)
		// Opening the outputs folder lists the run's file, as streams read it from the bucket.
		require.NoErrorf(t, chromedp.Do(tab, chromedp.Click(`//*[normalize-space(text())="outputs"]`),
			chromedp.WaitVisible(`//*[normalize-space(text())="model.txt"]`)),
			"%s shows model.txt in the outputs folder", url)
		t.Logf("the web UI showed the run's files in %s", time.Since(began).Round(100*time.Millisecond))
	})

	t.Run("a run of another project that asks for the store's keys or this run's artifacts is refused", func(t *testing.T) {
		// A run's own container gets none of the store's keys: only Polyaxon's init container
		// and sidecar do (envFrom the store's Secret), in the shape Polyaxon gives them.
		for _, ctr := range pods[0].Spec.Containers {
			assert.Equal(t, "polyaxon-main", ctr.Name, "the run's one container: the sidecar is a native one")
			assert.Empty(t, ctr.EnvFrom, "the run's own container")
			for _, e := range ctr.Env {
				assert.NotContains(t, e.Name, "AWS_", "the run's own container")
			}
		}
		sidecar, ok := polyaxonSidecar(pods[0])
		require.True(t, ok, "Polyaxon's sidecar, a native sidecar")
		assert.True(t, referencesSecret(sidecar.EnvFrom, "polyaxon-s3"), "the sidecar gets the store's keys")
		_, err := cli.run(ctx, "project", "create", "--name", "intruder")
		require.NoError(t, err)
		// Each way a polyaxonfile has to the keys or to another run's folder is refused by
		// the runs' admission policy: the run fails with the reason, and nothing ran.
		for _, h := range []struct{ file, message string }{
			{"s3-read-other-run.yaml", "container polyaxon-main (python:3.11-slim) is the run's own"},
			{"s3-init-other-run.yaml", "(polyaxon/polyaxon-init:2.18.0) fetches more than this run's own artifacts"},
			{"s3-init-own-image.yaml", "(python:3.11-slim) is not Polyaxon's init container"},
		} {
			args := []string{}
			if h.file != "s3-init-own-image.yaml" {
				args = append(args, "-P", "target="+uuid)
			}
			other := cli.submit(t, ctx, filepath.Join(files, h.file), "intruder", args...)
			msg := cli.waitStatus(t, ctx, "intruder", other, "failed")
			assert.Containsf(t, msg, "the artifacts store's keys (Secret polyaxon-s3) reach only Polyaxon's own init container", "%s: %.800s", h.file, msg)
			assert.Containsf(t, msg, h.message, "%s: %.800s", h.file, msg)
			assert.Empty(t, listKeys(t, ctx, client, bucket, other+"/"), "%s: the refused run left nothing in the bucket", h.file)
			t.Logf("%s: failed: %.400s", h.file, msg)
		}
	})

	t.Run("Polyaxon's sidecar follows no link of a run and writes only to the run's own folder", func(t *testing.T) {
		// Nothing here asks for the store, so the run is admitted: its own container links
		// outputs/environ to /proc/self/environ and writes a file under _related_runs/<uuid>/.
		// Unguarded, the sidecar uploaded its environment (the keys) as this run's output and
		// the file over the other project's run.
		before := listKeys(t, ctx, client, bucket, uuid+"/")
		_, err := cli.run(ctx, "project", "create", "--name", "planter")
		require.NoError(t, err)
		other := cli.submit(t, ctx, filepath.Join(files, "s3-through-the-sidecar.yaml"), "planter", "-P", "target="+uuid)
		cli.waitStatus(t, ctx, "planter", other, "succeeded")
		pod := waitRunPodsOf(t, c, cli, runsNS, "planter", other, 1)[0]
		assertSidecarGuarded(t, pod)
		keys := listKeys(t, ctx, client, bucket, other+"/")
		t.Logf("the planting run's objects: %s", strings.Join(keys, ", "))
		assert.Contains(t, keys, other+"/plxlogs/"+pod.Name+".jsonl", "the run's own logs are archived (the operator's collectLogs)")
		assert.NotContains(t, keys, other+"/outputs/environ", "the link to the sidecar's environment is not followed")
		for _, k := range keys {
			assert.NotContains(t, getObject(t, ctx, client, bucket, k), secret, "%s holds the store's secret key", k)
		}
		assert.Equal(t, want, getObject(t, ctx, client, bucket, output), "the other project's run's output is untouched")
		assert.Equal(t, before, listKeys(t, ctx, client, bucket, uuid+"/"), "nothing added to the other project's run's folder")
	})

	t.Run("streams serve a run's files only under its own project's URL", func(t *testing.T) {
		// The streams' routes take the project from the URL and read the bucket by uuid alone:
		// the gateway asks the API whether the run is the project's first.
		status, body := gatewayGet(t, ctx, addr, fmt.Sprintf("/streams/v1/%s/default/intruder/runs/%s/artifact?path=outputs/model.txt", runsNS, uuid))
		assert.Equal(t, http.StatusForbidden, status, "run %s's file under project intruder's URL: %q", uuid, body)
		assert.NotContains(t, body, strings.TrimSpace(want))
		status, body = gatewayGet(t, ctx, addr, fmt.Sprintf("/streams/v1/%s/default/vision/runs/%s/artifact?path=outputs/model.txt", runsNS, uuid))
		assert.Equal(t, http.StatusOK, status, body)
	})

	t.Run("a run of another project reads no run's files through the gateway, under any project's URL", func(t *testing.T) {
		// A run calls the gateway at the agent's POLYAXON_HOST, the runs' port: it serves the
		// API, which names the run's files, but no streams, which would read them.
		_, err := cli.run(ctx, "project", "create", "--name", "reader")
		require.NoError(t, err)
		other := cli.submit(t, ctx, filepath.Join(files, "s3-streams-other-project.yaml"), "reader",
			"-P", "target="+uuid, "-P", "namespace="+runsNS, "-P", "project=vision")
		cli.waitStatus(t, ctx, "reader", other, "succeeded")
		out, err := cli.run(ctx, "ops", "logs", "-p", "reader", "-uid", other)
		require.NoError(t, err)
		t.Logf("the reading run's log:\n%s", out)
		assert.Contains(t, out, "read api: 200 ", "the run reaches the API at its POLYAXON_HOST")
		assert.Contains(t, out, "read streams: 403 Runs reach the API only", "the other project's file, under its own project's URL")
		assert.Contains(t, out, "read tree: 403 ", "the other project's run's folder")
		assert.NotContains(t, out, strings.TrimSpace(want))
	})
	t.Logf("TestArtifactsInAnS3Store: %s in all", time.Since(start).Round(time.Second))
}

// listKeys are the keys of the bucket's objects under prefix.
func listKeys(t *testing.T, ctx context.Context, client *s3.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// getObject is an object's content.
func getObject(t *testing.T, ctx context.Context, client *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoErrorf(t, err, "s3://%s/%s", bucket, key)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return string(b)
}

// gatewayGet is a GET of path through the gateway at addr: its status and body.
func gatewayGet(t *testing.T, ctx context.Context, addr, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	resp, err := apiClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func referencesSecret(from []corev1.EnvFromSource, name string) bool {
	for _, f := range from {
		if f.SecretRef != nil && f.SecretRef.Name == name {
			return true
		}
	}
	return false
}

// dumpRunPodsOnFailure logs, when the test failed, each run pod's status, its containers' logs
// and the rewrites of its host programs.
func dumpRunPodsOnFailure(t *testing.T, c *testCluster, ns string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("run pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("run pod %s: %s", p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			b, _ := c.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name}).DoRaw(ctx)
			t.Logf("  %s (%+v):\n%s", cs.Name, cs.State, lastLines(string(b), 30))
		}
		dirs, _ := filepath.Glob(filepath.Join(local.PodsDir(c.Cluster), ns+"_"+p.Name+"_*", "rewrites.txt"))
		for _, f := range dirs {
			b, _ := os.ReadFile(f)
			t.Logf("  %s:\n%s", f, b)
		}
	}
}
