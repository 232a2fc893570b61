package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// check-artifacts-bucket, against a real S3 store (versitygw): with artifactsStore.kind s3, the
// bucket is tried with the keys (and the AWS_ENDPOINT_URL) of the Secret artifactsStore.secret.name
// names, before anything is installed. A missing bucket, refused keys, another account's
// bucket, a missing Secret or one without keys fail naming the value; a store that does not
// answer from here is a warning; a volume store, gcs and wasb are skipped.
func TestPreCheckArtifactsBucket(t *testing.T) {
	store := s3test.New(t)
	ctx := context.Background()
	require.NoError(t, store.CreateUser(ctx, "team", "team-secret-key"))
	require.NoError(t, store.CreateBucket(ctx, "team-artifacts", "team"))
	require.NoError(t, store.CreateBucket(ctx, "platform", ""))
	keys := func(access, secret, endpoint string) *corev1.Secret {
		return edgeSecret("polyaxon-s3", map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": endpoint,
			"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"})
	}
	// As values/artifacts-s3.yaml gives it.
	inBucket := func(kind, url string) map[string]any {
		return map[string]any{"artifactsStore": map[string]any{"name": "artifacts", "kind": kind, "bucket": url, "secret": map[string]any{"name": "polyaxon-s3"}}}
	}
	good := keys("team", "team-secret-key", store.Endpoint)
	run := func(vals map[string]any, objs ...runtime.Object) check.Result {
		return edgeCheck(t, "artifacts-bucket", vals, objs...)
	}

	r := run(map[string]any{})
	assert.Equal(t, check.Skipped, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "volume_claim, not a bucket")
	r = run(inBucket("gcs", "gs://team-artifacts"), good)
	assert.Equal(t, check.Skipped, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "the artifacts store is gcs: this check speaks S3 only")

	r = run(inBucket("s3", "s3://team-artifacts"), good)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "s3://team-artifacts is readable and writable with the keys of Secret polyaxon-s3", r.Detail)
	assert.Empty(t, bucketKeys(t, store, "team-artifacts"), "the probe leaves nothing behind")

	for _, tc := range []struct {
		name   string
		url    string
		secret *corev1.Secret
		want   []string
	}{
		{"no such bucket", "s3://no-such-bucket", good,
			[]string{"artifactsStore.bucket s3://no-such-bucket", `bucket "no-such-bucket" does not exist: create it`}},
		{"wrong secret key", "s3://team-artifacts", keys("team", "wrong", store.Endpoint),
			[]string{`Secret "polyaxon-s3" (artifactsStore.secret.name)`, "refused the credentials (SignatureDoesNotMatch)"}},
		{"unknown access key", "s3://team-artifacts", keys("nobody", "team-secret-key", store.Endpoint),
			[]string{`Secret "polyaxon-s3" (artifactsStore.secret.name)`, "refused the credentials (InvalidAccessKeyId)"}},
		{"another account's bucket", "s3://platform", good,
			[]string{"artifactsStore.bucket s3://platform", "access denied"}},
		{"no keys in the Secret", "s3://team-artifacts", edgeSecret("polyaxon-s3", map[string]string{"AWS_REGION": "us-east-1"}),
			[]string{`artifactsStore.secret.name: Secret "polyaxon-s3" has no AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY (it has AWS_REGION)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(inBucket("s3", tc.url), tc.secret)
			assert.Equal(t, check.Failed, r.Status, r.Detail)
			for _, w := range tc.want {
				assert.Contains(t, r.Detail, w)
			}
			assert.Contains(t, r.Hint, "create the bucket artifactsStore.bucket names")
		})
	}

	r = run(inBucket("s3", "s3://team-artifacts"))
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, `artifactsStore.secret.name: Secret "polyaxon-s3" not found in namespace "polyaxon"`)
	assert.Contains(t, r.Detail, "kubectl -n polyaxon create secret generic polyaxon-s3 --from-literal=AWS_ACCESS_KEY_ID=")

	// The store's address inside the cluster, as e2e/artifacts_s3_test.go gives it.
	r = run(inBucket("s3", "s3://team-artifacts"), keys("team", "team-secret-key", "http://polyaxon-s3.s3.svc:7070"))
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "artifactsStore.bucket s3://team-artifacts: the store did not answer from here")
	assert.Contains(t, r.Detail, "polyaxon-s3.s3.svc")
}
