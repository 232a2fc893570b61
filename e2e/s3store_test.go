package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// TestS3StoreInTheCluster (issue 56 item 1): the S3 store add-on comes up as a Deployment of a
// namespace that enforces the restricted Pod Security level (versitygw, as the local provider's
// host program for its image), its Service answers S3 from this machine, its admin API makes
// an account of role user and a bucket that account owns, and an object put through the
// Service is a file under the pod's data volume; an account that does not own the bucket is
// refused.
func TestS3StoreInTheCluster(t *testing.T) {
	sideBySide(t, controlPlaneOnly)
	bin := s3storeBuild.get(t)
	c := newCluster(t, "s3store", local.WithHostPrograms(s3store.Program(bin)))
	ctx := ctxT(t, 5*time.Minute)
	const ns = "s3"
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	start := time.Now()
	st, err := s3store.Deploy(ctx, c.Cluster, s3store.Options{Namespace: ns, NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}})
	require.NoError(t, err)
	t.Logf("the store's pod Ready in %s", time.Since(start).Round(100*time.Millisecond))
	assert.Equal(t, "http://polyaxon-s3.s3:7070", st.Endpoint, "what runs are given")
	store, err := st.Connect(ctx, s3store.LocalForward(c.Cluster))
	require.NoError(t, err)

	const owner, ownerSecret = "PROJECTAOWNER0000001", "project-a-secret-0123456789abcdef012345"
	require.NoError(t, store.CreateUser(ctx, owner, ownerSecret))
	require.NoError(t, store.CreateBucket(ctx, "polyaxon-artifacts", owner))
	client := store.Client(owner, ownerSecret)
	const key = "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/outputs/model.txt"
	content := []byte("weights\n")
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("polyaxon-artifacts"), Key: aws.String(key), Body: bytes.NewReader(content)})
	require.NoError(t, err)
	got, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("polyaxon-artifacts"), Key: aws.String(key)})
	require.NoError(t, err)
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, content, body)

	dir, err := st.LocalDataDir(ctx)
	require.NoError(t, err)
	onDisk, err := os.ReadFile(filepath.Join(dir, "polyaxon-artifacts", filepath.FromSlash(key)))
	require.NoError(t, err, "the object is a file under the pod's data volume")
	assert.Equal(t, content, onDisk)

	require.NoError(t, store.CreateUser(ctx, "PROJECTBOWNER0000001", "project-b-secret-0123456789abcdef012345"))
	_, err = store.Client("PROJECTBOWNER0000001", "project-b-secret-0123456789abcdef012345").GetObject(ctx,
		&s3.GetObjectInput{Bucket: aws.String("polyaxon-artifacts"), Key: aws.String(key)})
	assertS3Code(t, err, "AccessDenied")
	_, err = store.Client(owner, "not-the-secret-0123456789abcdef0123456789").GetObject(ctx,
		&s3.GetObjectInput{Bucket: aws.String("polyaxon-artifacts"), Key: aws.String(key)})
	assertS3Code(t, err, "SignatureDoesNotMatch")

	// The root keys reach the container through its Secret only.
	dep, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, st.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		assert.NotContains(t, a, st.RootSecretKey)
	}
	t.Logf("the add-on up and a bucket's round trip in %s", time.Since(start).Round(100*time.Millisecond))
}

// assertS3Code: err is an S3 error answer of that code.
func assertS3Code(t *testing.T, err error, code string) {
	t.Helper()
	var apiErr smithy.APIError
	if assert.Truef(t, errors.As(err, &apiErr), "want %s, got %v", code, err) {
		assert.Equal(t, code, apiErr.ErrorCode())
	}
}
