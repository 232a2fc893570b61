package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// s3DemoHome is the HOME of TestDemoS3StoreStep's demo, under the suite's directory.
const s3DemoHome = "s3demo-home"

// TestDemoS3StoreStep (issue 56): the steps `DEMO_ARTIFACTS=s3 make demo` runs before and after
// its install, with e2ecluster built from this checkout, on the local provider, in a HOME of
// their own: `e2ecluster up --artifacts s3` makes the demo cluster with versitygw among the
// hosts daemon's programs; `e2ecluster s3store up` brings the store up in namespace s3 (its pod
// runs versitygw on this machine), makes the demo's account and its bucket, writes Secret
// polyaxon-s3 (keys, the in-cluster endpoint, both regions) in the release's namespace and
// the chart's values, which the chart renders as a bucket store. An object put with the
// Secret's keys (as Polyaxon's sidecar puts a run's outputs) is listed by `s3store ls` and is a
// file of the store's data volume here; a second `s3store up` keeps the keys and the object;
// `s3store secret` writes the Secret in the runs' namespace; `up` refuses to turn the cluster
// into a volume demo; `down` stops versitygw and removes the step's files. What the release
// then does with the bucket is TestArtifactsInAnS3Store's (and `DEMO_ARTIFACTS=s3 make demo`'s).
func TestDemoS3StoreStep(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own; no Polyaxon program runs in it
	start := time.Now()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	kubeBin, err := kubeBinaries()
	require.NoError(t, err)
	venv, _ := polyaxonPrograms(t)
	// What `up` runs, built once into the real cache, which the demo's HOME shares (its bin
	// directory only: the demo's state, cluster and kubeconfig stay its own).
	s3storeBuild.get(t)
	trainingOperator.get(t)
	oauth2Proxy.get(t)
	home := filepath.Join(suite.dir, s3DemoHome)
	cache := filepath.Join(home, ".cache", "polyaxon-deploy")
	require.NoError(t, os.MkdirAll(cache, 0o700))
	require.NoError(t, os.Symlink(filepath.Join(cluster.CacheDir(), "bin"), filepath.Join(cache, "bin")))
	env := append(demoEnv(t, home, kubeBin), demoVenvEnv+"="+venv)

	e2ecluster := filepath.Join(t.TempDir(), "e2ecluster")
	build := exec.Command("go", "build", "-o", e2ecluster, "./e2e/cmd/e2ecluster")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoErrorf(t, err, "go build ./e2e/cmd/e2ecluster\n%s", out)
	run := func(timeout time.Duration, args ...string) runResult {
		return runIn(t, root, env, timeout, e2ecluster, args...)
	}
	demoDir := filepath.Join(cache, "demo")

	r := run(10*time.Minute, "up", "--provider", "local", "--artifacts", "s3")
	t.Cleanup(func() {
		r := run(5*time.Minute, "down")
		assert.Equalf(t, 0, r.code, "e2ecluster down\n%s", r)
		assert.Empty(t, cmdlinesWith(home), "no process of the demo is left (versitygw, the hosts daemon)")
		for _, f := range []string{"s3store.json", "artifacts-s3.yaml", "s3-address"} {
			assert.NoFileExists(t, filepath.Join(demoDir, f), "down removes what the S3 step wrote")
		}
	})
	require.Equalf(t, 0, r.code, "e2ecluster up --artifacts s3\n%s", r)
	r = run(time.Minute, "env")
	require.Equalf(t, 0, r.code, "e2ecluster env\n%s", r)
	assert.Contains(t, r.stdout, "artifacts='s3'\n", "what demo.sh reads")
	t.Logf("demo cluster with the S3 store's program up in %s", time.Since(start).Round(100*time.Millisecond))

	began := time.Now()
	r = run(6*time.Minute, "s3store", "up", "--namespace", "polyaxon")
	require.Equalf(t, 0, r.code, "e2ecluster s3store up\n%s", r)
	t.Logf("s3store up (the store, the account, the bucket, the Secret, the values) in %s", time.Since(began).Round(100*time.Millisecond))
	valuesFile := strings.TrimSpace(r.stdout)
	assert.Equal(t, filepath.Join(demoDir, "artifacts-s3.yaml"), valuesFile, "the values file's path, what demo.sh gives the install")
	b, err := os.ReadFile(valuesFile)
	require.NoError(t, err)
	var values struct {
		ArtifactsStore struct {
			Name, Kind, Bucket string
			Secret             struct{ Name string }
		} `json:"artifactsStore"`
	}
	require.NoError(t, yaml.Unmarshal(b, &values))
	assert.Equal(t, "s3", values.ArtifactsStore.Kind)
	assert.Equal(t, "s3://polyaxon-artifacts", values.ArtifactsStore.Bucket)
	assert.Equal(t, "polyaxon-s3", values.ArtifactsStore.Secret.Name)
	assert.Equal(t, "artifacts", values.ArtifactsStore.Name)

	c, err := cluster.FromKubeconfig("polyaxon-demo", "local", filepath.Join(demoDir, "kubeconfig"))
	require.NoError(t, err)
	ctx := ctxT(t, 10*time.Minute)
	secret := func(ns string) map[string]string {
		s, err := c.Clientset.CoreV1().Secrets(ns).Get(ctx, "polyaxon-s3", metav1.GetOptions{})
		require.NoError(t, err, "Secret %s/polyaxon-s3", ns)
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data
	}
	creds := secret("polyaxon")
	assert.Equal(t, "http://polyaxon-s3.s3:7070", creds["AWS_ENDPOINT_URL"], "the store's Service, as runs and the gateway reach it")
	assert.Equal(t, s3test.Region, creds["AWS_REGION"])
	assert.Equal(t, s3test.Region, creds["AWS_DEFAULT_REGION"])
	require.Len(t, creds["AWS_ACCESS_KEY_ID"], 20)
	require.Len(t, creds["AWS_SECRET_ACCESS_KEY"], 40)
	nsS3, err := c.Clientset.CoreV1().Namespaces().Get(ctx, "s3", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", nsS3.Labels["pod-security.kubernetes.io/enforce"])
	pods, err := c.Clientset.CoreV1().Pods("s3").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=s3store"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	pod := pods.Items[0]
	assert.True(t, podReady(&pod), "the store's pod is Ready: versitygw answers its probe here")
	node, err := c.Clientset.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cluster.PoolCore, node.Labels[cluster.PoolLabel], "the store runs on the core pool")

	// An object put with the Secret's keys, as Polyaxon's sidecar puts a run's output, through
	// the address `s3store env` gives an S3 client of this machine.
	r = run(time.Minute, "s3store", "env")
	require.Equalf(t, 0, r.code, "e2ecluster s3store env\n%s", r)
	exports := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^export (AWS_[A-Z_]+)='([^']*)'$`).FindAllStringSubmatch(r.stdout, -1) {
		exports[m[1]] = m[2]
	}
	assert.Equal(t, creds["AWS_ACCESS_KEY_ID"], exports["AWS_ACCESS_KEY_ID"])
	assert.Equal(t, creds["AWS_SECRET_ACCESS_KEY"], exports["AWS_SECRET_ACCESS_KEY"])
	assert.Equal(t, s3test.Region, exports["AWS_DEFAULT_REGION"])
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, exports["AWS_ENDPOINT_URL"], "the store's Service from this machine\n%s", r.stdout)
	client := s3test.Attach(exports["AWS_ENDPOINT_URL"], "", "", "").Client(creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"])
	const key = "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/outputs/model.txt"
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("polyaxon-artifacts"), Key: aws.String(key), Body: bytes.NewReader([]byte("weights\n"))})
	require.NoError(t, err, "the demo's account writes to its bucket")
	listed := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +8 +s3://polyaxon-artifacts/` + regexp.QuoteMeta(key) + `$`)
	r = run(time.Minute, "s3store", "ls")
	require.Equalf(t, 0, r.code, "e2ecluster s3store ls\n%s", r)
	assert.Regexp(t, listed, r.stdout, "s3store ls: time, size, URL")
	files, _ := filepath.Glob(filepath.Join(cache, "kwok", "clusters", "polyaxon-demo", "pods", "s3_"+pod.Name+"_*", "volumes", "data", "polyaxon-artifacts", filepath.FromSlash(key)))
	require.Len(t, files, 1, "the object is a file of the store's data volume on this machine")
	onDisk, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, "weights\n", string(onDisk))

	// `make demo` again: the same store, account and bucket.
	r = run(6*time.Minute, "s3store", "up", "--namespace", "polyaxon")
	require.Equalf(t, 0, r.code, "e2ecluster s3store up, again\n%s", r)
	assert.Equal(t, valuesFile, strings.TrimSpace(r.stdout))
	assert.Equal(t, creds, secret("polyaxon"), "the Secret keeps the account's keys")
	r = run(time.Minute, "s3store", "ls", "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/")
	require.Equalf(t, 0, r.code, "e2ecluster s3store ls PREFIX\n%s", r)
	assert.Regexp(t, listed, r.stdout, "the object is still in the bucket")

	// After the install, in the runs' namespace the release made.
	_, err = c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-runs"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	r = run(time.Minute, "s3store", "secret", "--namespace", "polyaxon-runs")
	require.Equalf(t, 0, r.code, "e2ecluster s3store secret\n%s", r)
	assert.Equal(t, creds, secret("polyaxon-runs"))

	// The values are a bucket store to the chart (what the install renders, offline here).
	render := runIn(t, root, env, 2*time.Minute, deployBinary(t), "render", "--profile", "production", "-f", valuesFile, "--set", "edge.enabled=false")
	require.Equalf(t, 0, render.code, "polyaxon-deploy render -f %s\n%s", valuesFile, render)
	assert.Contains(t, render.stdout, `POLYAXON_AGENT_ARTIFACTS_STORE: "{\"kind\":\"s3\",\"name\":\"artifacts\",\"schema\":{\"bucket\":\"s3://polyaxon-artifacts\"},\"secret\":{\"name\":\"polyaxon-s3\"}}"`)
	assert.NotRegexp(t, `(?m)^kind: PersistentVolumeClaim\nmetadata:\n  name: polyaxon-artifacts`, render.stdout, "no claim for a bucket store")

	r = run(time.Minute, "up", "--provider", "local", "--artifacts", "volume")
	assert.Equalf(t, 1, r.code, "up --artifacts volume on the S3 demo\n%s", r)
	assert.Contains(t, r.stderr, "was made with DEMO_ARTIFACTS=s3: `make demo-down`, then `DEMO_ARTIFACTS=volume make demo`")
	t.Logf("TestDemoS3StoreStep: %s before the teardown", time.Since(start).Round(100*time.Millisecond))
}
