package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// fakeBackup writes a finished backup directory (a manifest and a dump of these bytes) of
// release polyaxon, started at started.
func fakeBackup(t *testing.T, name string, started time.Time, dump string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "database.dump"), []byte(dump), 0o600))
	sum := sha256.Sum256([]byte(dump))
	m := backup.Manifest{FormatVersion: 1, Release: "polyaxon", Namespace: "polyaxon", Source: backup.SourceLocal, Database: "polyaxon",
		DumpFile: "database.dump", DumpFormat: "custom", DumpSize: int64(len(dump)), SHA256: hex.EncodeToString(sum[:]), StartedAt: started, FinishedAt: started}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.ManifestFile), b, 0o600))
	return dir
}

func put(t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	require.NoError(t, err)
}

func keys(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, aws.ToString(o.Key))
	}
	return ks
}

// What someone who may put objects in the bucket plants is never acted on: folders whose names
// read back as another path (%2F), "..", or "latest" are not backups; prune removes only
// backups' folders and never the prefix or the bucket; latest is the newest whole backup; a
// damaged newest backup never pushes a good one out.
func TestPlantedObjectsAreNotBackups(t *testing.T) {
	s3test.SkipIfShort(t)
	ctx := context.Background()
	srv := s3test.New(t)
	require.NoError(t, srv.CreateBucket(ctx, "bkt", ""))
	root := srv.RootClient()
	store, err := Open(ctx, WithEndpoint(srv.Endpoint), WithStaticCredentials(srv.RootAccessKey, srv.RootSecretKey), WithRegion(srv.Region))
	require.NoError(t, err)
	p := Location{Bucket: "bkt", Prefix: "p"}
	now := time.Now().UTC().Truncate(time.Second)

	older := p.Join("polyaxon-1")
	newer := p.Join("polyaxon-2")
	require.NoError(t, store.Upload(ctx, fakeBackup(t, "polyaxon-1", now.Add(-48*time.Hour), "PGDMP older"), older))
	require.NoError(t, store.Upload(ctx, fakeBackup(t, "polyaxon-2", now.Add(-time.Hour), "PGDMP newer"), newer))
	put(t, root, "bkt", "artifacts/run-1/outputs/model.bin", "not a backup")

	// Planted: folders whose names are not backups', each with a manifest of an old backup of
	// the same release (so a retention rule would remove them), and a "latest" dated ahead.
	// (A ".." folder cannot be planted: versitygw resolves the key's "..".)
	oldManifest := func(started time.Time) string {
		m := backup.Manifest{FormatVersion: 1, Release: "polyaxon", Namespace: "polyaxon", Source: backup.SourceLocal, Database: "polyaxon",
			DumpFile: "d", DumpSize: 1, SHA256: "x", StartedAt: started, FinishedAt: started}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, name := range []string{"%2F", "polyaxon-1%2F", "latest"} {
		started := now.Add(-1000 * time.Hour)
		if name == "latest" {
			started = now.Add(365 * 24 * time.Hour)
		}
		put(t, root, "bkt", "p/"+name+"/d", "x")
		put(t, root, "bkt", "p/"+name+"/manifest.json", oldManifest(started))
	}

	listed, err := store.List(ctx, p)
	require.NoError(t, err)
	var dirs []string
	for _, e := range listed {
		dirs = append(dirs, e.Dir)
	}
	assert.Equal(t, []string{newer.String(), older.String()}, dirs, "only backups' folders are listed")

	got, err := store.Resolve(ctx, p.Join(Latest))
	require.NoError(t, err)
	assert.Equal(t, newer, got, "latest is the newest whole backup, not a folder called latest")
	_, err = store.Resolve(ctx, p.Join("%2F"))
	assert.ErrorContains(t, err, "not a backup's name")

	pruned, err := store.Prune(ctx, p, backup.Retention{KeepLast: 1}, now, false)
	require.NoError(t, err)
	require.Len(t, pruned, 2)
	left := keys(t, root, "bkt")
	assert.Contains(t, left, "artifacts/run-1/outputs/model.bin", "nothing outside the backups' folders is removed")
	assert.Contains(t, left, "p/polyaxon-2/manifest.json", "the newest is kept")
	assert.NotContains(t, left, "p/polyaxon-1/manifest.json", "the older is pruned")
	for _, name := range []string{"%2F", "polyaxon-1%2F", "latest"} {
		assert.Contains(t, left, "p/"+name+"/manifest.json", "planted %s is left alone", name)
	}
	assert.ErrorContains(t, store.Remove(ctx, Location{Bucket: "bkt", Prefix: "p/.."}), "not a backup's name")

	// The newest backup damaged in the bucket (its size kept): prune reads it, leaves it alone,
	// and keeps the good one behind it.
	require.NoError(t, store.Upload(ctx, fakeBackup(t, "polyaxon-3", now.Add(-30*time.Minute), "PGDMP third"), p.Join("polyaxon-3")))
	put(t, root, "bkt", "p/polyaxon-3/database.dump", "PGDMP thirD")
	pruned, err = store.Prune(ctx, p, backup.Retention{KeepLast: 1}, now, false)
	require.NoError(t, err)
	for _, pr := range pruned {
		if pr.Dir == p.Join("polyaxon-3").String() {
			assert.False(t, pr.Removed)
			assert.Contains(t, pr.Why, "damaged")
		}
		if pr.Dir == newer.String() {
			assert.False(t, pr.Removed, "the good backup behind a damaged newest is kept: %s", pr.Why)
		}
	}
	assert.Contains(t, keys(t, root, "bkt"), "p/polyaxon-2/manifest.json")

	// An object grown in the bucket is refused before it is copied.
	put(t, root, "bkt", "p/polyaxon-2/database.dump", strings.Repeat("x", 4096))
	_, err = store.Download(ctx, newer, filepath.Join(t.TempDir(), "copy"))
	assert.ErrorContains(t, err, "the manifest recorded")
}

// WithEnvironmentOnly reads a pod's variables, not this process's: a region or keys set here do
// not leak into what is checked.
func TestEnvironmentOnlyIgnoresTheProcessEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "from-the-shell")
	cfg := configOf(map[string]string{"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t", "AWS_ENDPOINT_URL": "http://store:7070"})
	assert.Equal(t, DefaultRegion, cfg.Region)
	creds, err := cfg.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "k", creds.AccessKeyID)
	assert.Equal(t, "t", creds.SessionToken, "temporary keys keep their session token")
	assert.Equal(t, "http://store:7070", *cfg.BaseEndpoint)
}
