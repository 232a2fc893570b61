package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// The artifacts bucket of the kind scenario, in the S3 store the backup subtest runs, with an
// account of its own.
const (
	kindArtifactsBucketName = "polyaxon-artifacts"
	kindArtifactsAccess     = "KINDARTIFACTS0000001"
	kindArtifactsSecret     = "kind-artifacts-secret-0123456789abcdef0123"
)

// kindArtifactsBucket makes the bucket and its account in st, and Secret polyaxon-s3 (the
// keys, the store's endpoint in the cluster, the region) in each namespace, and returns the
// values that make the bucket the release's artifacts store.
func kindArtifactsBucket(t *testing.T, c *cluster.Cluster, st *s3store.Store, namespaces ...string) []string {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	store, err := st.Connect(ctx, kindForward(t, c))
	require.NoError(t, err)
	require.NoError(t, store.CreateUser(ctx, kindArtifactsAccess, kindArtifactsSecret))
	require.NoError(t, store.CreateBucket(ctx, kindArtifactsBucketName, kindArtifactsAccess))
	creds := map[string]string{
		"AWS_ACCESS_KEY_ID": kindArtifactsAccess, "AWS_SECRET_ACCESS_KEY": kindArtifactsSecret, "AWS_ENDPOINT_URL": st.Endpoint,
		"AWS_REGION": s3test.Region, "AWS_DEFAULT_REGION": s3test.Region,
	}
	for _, ns := range namespaces {
		_, err := c.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-s3"}, StringData: creds}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return []string{"--set", "artifactsStore.name=artifacts", "--set", "artifactsStore.kind=s3",
		"--set", "artifactsStore.bucket=s3://" + kindArtifactsBucketName, "--set", "artifactsStore.secret.name=polyaxon-s3"}
}

// kindForward reaches a Service of the kind cluster through kubectl port-forward.
func kindForward(t *testing.T, c *cluster.Cluster) s3store.Forward {
	return func(_ context.Context, namespace, service string, port int32) (string, error) {
		return strings.TrimPrefix(kindPortForward(t, c, namespace, "svc/"+service, int(port)), "http://"), nil
	}
}

// kindRunOutputsInTheBucket: with real kubelets and the runs' NetworkPolicy enforced, a run
// through Polyaxon's CLI writes outputs/model.txt and ends at once; Polyaxon's guarded sidecar,
// a native sidecar that never asks the API server, is stopped by the kubelet after the run's
// container and uploads the file then. Polyaxon's own sidecar, which needs the API server,
// left only the spec and the logs (collected by the API) in the bucket.
func kindRunOutputsInTheBucket(t *testing.T, c *cluster.Cluster, cli *polyaxonCLI, st *s3store.Store, runs string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Minute)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	_, err = cli.run(ctx, "project", "create", "--name", "bucket")
	require.NoError(t, err)
	began := time.Now()
	uuid := cli.submit(t, ctx, filepath.Join(root, "e2e", "testdata", "polyaxonfiles", "s3-outputs.yaml"), "bucket")
	cli.waitStatus(t, ctx, "bucket", uuid, "succeeded")
	t.Logf("run %s succeeded %s after its submission", uuid, time.Since(began).Round(time.Second))
	pods, err := c.Clientset.CoreV1().Pods(runs).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	kindNativeSidecarEnded(t, ctx, c.Clientset, pods.Items[0])

	store, err := st.Connect(ctx, kindForward(t, c))
	require.NoError(t, err)
	client := store.Client(kindArtifactsAccess, kindArtifactsSecret)
	output := uuid + "/outputs/model.txt"
	var keys []string
	waitFor(t, 2*time.Minute, "the run's output in the bucket", func(ctx context.Context) (bool, string, error) {
		keys = listKeys(t, ctx, client, kindArtifactsBucketName, uuid+"/")
		return strings.Contains(strings.Join(keys, " "), output), strings.Join(keys, ", "), nil
	})
	t.Logf("s3://%s/%s...: %s", kindArtifactsBucketName, uuid, strings.Join(keys, ", "))
	assert.Equal(t, "weights of default.bucket.runs."+uuid+"\n", getObject(t, ctx, client, kindArtifactsBucketName, output))
}
