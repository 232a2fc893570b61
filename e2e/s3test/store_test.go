package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripKeepsObjectsAsFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(t)
	require.NoError(t, s.CreateBucket(ctx, "artifacts", ""))
	c := s.RootClient()

	content := []byte("model weights\n")
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("artifacts"), Key: aws.String("runs/0001/outputs/model.txt"), Body: bytes.NewReader(content),
	})
	require.NoError(t, err)

	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("artifacts"), Key: aws.String("runs/0001/outputs/model.txt")})
	require.NoError(t, err)
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, content, body)

	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("artifacts"), Prefix: aws.String("runs/")})
	require.NoError(t, err)
	assert.Equal(t, []string{"runs/0001/outputs/model.txt"}, keys(list.Contents))

	onDisk, err := os.ReadFile(filepath.Join(s.DataDir, "artifacts", "runs", "0001", "outputs", "model.txt"))
	require.NoError(t, err, "the object is a file under DataDir/<bucket>/<key>")
	assert.Equal(t, content, onDisk)
}

// Project isolation will rest on this: an account of role user reaches its own buckets only.
func TestUserAccountsReachOnlyTheirOwnBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(t)
	require.NoError(t, s.CreateUser(ctx, "alice", "alice-secret-0123456789"))
	require.NoError(t, s.CreateUser(ctx, "bob", "bob-secret-0123456789"))
	require.NoError(t, s.CreateBucket(ctx, "project-a", "alice"))
	require.NoError(t, s.CreateBucket(ctx, "project-b", "bob"))
	alice, bob := s.Client("alice", "alice-secret-0123456789"), s.Client("bob", "bob-secret-0123456789")

	_, err := bob.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("project-b"), Key: aws.String("secret.txt"), Body: strings.NewReader("bob's")})
	require.NoError(t, err, "an owner writes its bucket")
	_, err = alice.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("project-a"), Key: aws.String("mine.txt"), Body: strings.NewReader("alice's")})
	require.NoError(t, err)

	_, err = alice.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("project-b"), Key: aws.String("secret.txt")})
	assertCode(t, err, "AccessDenied")
	_, err = alice.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("project-b")})
	assertCode(t, err, "AccessDenied")
	_, err = alice.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("project-b"), Key: aws.String("planted.txt"), Body: strings.NewReader("x")})
	assertCode(t, err, "AccessDenied")
	_, err = alice.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("project-b"), Key: aws.String("secret.txt")})
	assertCode(t, err, "AccessDenied")
	_, err = alice.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("alice-made")})
	assertCode(t, err, "AccessDenied")

	buckets, err := alice.ListBuckets(ctx, &s3.ListBucketsInput{})
	require.NoError(t, err)
	var names []string
	for _, b := range buckets.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	assert.Equal(t, []string{"project-a"}, names, "a user lists only its own buckets")

	list, err := s.RootClient().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("project-b")})
	require.NoError(t, err, "root reaches every bucket")
	assert.Equal(t, []string{"secret.txt"}, keys(list.Contents), "bob's bucket is as bob left it")
}

func TestWrongKeysAndMissingBucketsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(t)
	require.NoError(t, s.CreateBucket(ctx, "backups", ""))

	_, err := s.Client(s.RootAccessKey, s.RootSecretKey+"x").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("backups")})
	assertCode(t, err, "SignatureDoesNotMatch")
	_, err = s.Client("NOSUCHACCESSKEY00000", s.RootSecretKey).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("backups")})
	assertCode(t, err, "InvalidAccessKeyId")

	_, err = s.RootClient().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("no-such-bucket")})
	assertCode(t, err, "NoSuchBucket")
	_, err = s.RootClient().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("no-such-bucket"), Key: aws.String("x")})
	assertCode(t, err, "NoSuchBucket")
	_, err = s.RootClient().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("backups"), Key: aws.String("missing")})
	assertCode(t, err, "NoSuchKey")
}

// Backups will be uploaded in parts.
func TestMultipartUpload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(t)
	require.NoError(t, s.CreateBucket(ctx, "backups", ""))
	c := s.RootClient()

	const size, partSize = 20 << 20, 8 << 20 // parts of 8, 8 and 4 MiB
	content := make([]byte, size)
	_, _ = rand.Read(content)
	key := aws.String("polyaxon/2026-11-30T00-00-00Z/db.dump")

	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("backups"), Key: key})
	require.NoError(t, err)
	var parts []types.CompletedPart
	for n, off := int32(1), 0; off < size; n, off = n+1, off+partSize {
		part, err := c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String("backups"), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: bytes.NewReader(content[off:min(off+partSize, size)]),
		})
		require.NoError(t, err)
		parts = append(parts, types.CompletedPart{ETag: part.ETag, PartNumber: aws.Int32(n)})
	}
	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String("backups"), Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(strings.Trim(aws.ToString(done.ETag), `"`), "-3"), "a multipart ETag names its 3 parts: %s", aws.ToString(done.ETag))

	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("backups"), Key: key})
	require.NoError(t, err)
	h := sha256.New()
	n, err := io.Copy(h, got.Body)
	got.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, int64(size), n)
	assert.Equal(t, sha256.Sum256(content), [32]byte(h.Sum(nil)))

	fi, err := os.Stat(filepath.Join(s.DataDir, "backups", aws.ToString(key)))
	require.NoError(t, err)
	assert.Equal(t, int64(size), fi.Size())
}

// A child process's AWS SDK finds the store through Env alone, as the backup CronJob's will.
func TestEnvPointsAnSDKAtTheStore(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	require.NoError(t, s.CreateUser(ctx, "carol", "carol-secret-0123456789"))
	require.NoError(t, s.CreateBucket(ctx, "carols", "carol"))

	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_PROFILE", "")
	for _, kv := range s.Env("carol", "carol-secret-0123456789") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	require.NoError(t, err)
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("carols"), Key: aws.String("k"), Body: strings.NewReader("v")})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(s.DataDir, "carols", "k"))
	assert.NoError(t, err)
}

func TestBinaryOverrideThatIsMissingSaysMakeS3store(t *testing.T) {
	t.Setenv(BinaryEnv, filepath.Join(t.TempDir(), "versitygw"))
	_, err := Binary()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make s3store")
	_, err = Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make s3store")
}

func assertCode(t *testing.T, err error, code string) {
	t.Helper()
	var api smithy.APIError
	if assert.True(t, errors.As(err, &api), "want S3 error %s, got %v", code, err) {
		assert.Equal(t, code, api.ErrorCode(), "%v", err)
	}
}

func keys(objs []types.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, aws.ToString(o.Key))
	}
	return out
}

func TestStartTriesOtherPortsWhenOneIsTakenAndCloseLeavesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 {
			ports[0] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = freePorts })

	s, err := Start(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "the first start found its port taken")
	pid := s.cmd.Process.Pid
	_, err = s.RootClient().ListBuckets(context.Background(), &s3.ListBucketsInput{})
	require.NoError(t, err)

	require.NoError(t, s.Close())
	assert.NoDirExists(t, s.Dir)
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "versitygw is gone")
	require.NoError(t, s.Close(), "a second Close is a no-op")
}
