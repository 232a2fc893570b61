package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// bucketKeys lists the object keys under prefix, as the store holds them.
func bucketKeys(t *testing.T, c *s3.Client, bucket, prefix string) []string {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	require.NoError(t, err)
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// setEnv points the AWS SDK of the CLI (in this process) at the store as one account.
func setEnv(t *testing.T, kv []string) {
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
}

// Backups kept in a bucket of a real S3 store (versitygw), the way a team keeps them off the
// cluster: taken sealed, listed and checked without a copy, verified and restored from
// .../latest; a bucket that is not there, keys it refuses, another team's bucket and a backup
// without a key are refused before anything is dumped; a changed object fails list, verify and
// restore; a forged manifest writes nothing outside the private copy.
func TestBackupToABucketCLI(t *testing.T) {
	ctx := context.Background()
	s, want, runIt := localBackupCLI(t, 500)
	store := s3test.New(t)
	require.NoError(t, store.CreateUser(ctx, "team", "team-secret-key"))
	require.NoError(t, store.CreateBucket(ctx, "backups", "team"))
	require.NoError(t, store.CreateBucket(ctx, "platform", "")) // the root's: not the team's
	setEnv(t, store.Env("team", "team-secret-key"))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	root := store.RootClient()

	local := []string{"--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir}
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	require.NoError(t, os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600))
	sealed := []string{"--encrypt-to", key.Recipient().String()}
	backupTo := func(where string, extra ...string) (int, string, string) {
		return runIt(append(append([]string{"backup", "--dir", where, "-o", "json"}, extra...), local...)...)
	}
	nothingLeftHere := func(what string) {
		t.Helper()
		copies, err := filepath.Glob(filepath.Join(tmp, "polyaxon-deploy-*-*"))
		require.NoError(t, err)
		assert.Empty(t, copies, "%s: no private copy is left in $TMPDIR", what)
	}

	// Refused before anything is dumped, each naming what to fix.
	code, out, errs := backupTo("s3://backups/polyaxon")
	assert.Equal(t, ExitUsage, code, out+errs)
	assert.Contains(t, errs, "--encrypt-to age1...")
	assert.Contains(t, errs, "--no-encrypt")
	code, out, errs = backupTo("s3://no-such-bucket/polyaxon", sealed...)
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, `no-such-bucket\" does not exist`)
	assert.Contains(t, errs, "nothing was dumped")
	code, out, errs = backupTo("s3://platform/polyaxon", sealed...)
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, "access denied")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	code, out, errs = backupTo("s3://backups/polyaxon", sealed...)
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, "refused the credentials")
	assert.Contains(t, errs, "AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "team-secret-key")
	code, out, errs = backupTo("s3://Backups/../x", sealed...)
	assert.Equal(t, ExitUsage, code, out+errs)
	assert.Empty(t, bucketKeys(t, root, "backups", ""), "a refused backup puts nothing in the bucket")
	assert.Empty(t, bucketKeys(t, root, "platform", ""))
	nothingLeftHere("refused backups")

	// Two sealed backups (names are to the second).
	var paths []string
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		code, out, errs = backupTo("s3://backups/polyaxon", sealed...)
		require.Equal(t, 0, code, out+errs)
		var res struct{ Data struct{ Path string } }
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.True(t, strings.HasPrefix(res.Data.Path, "s3://backups/polyaxon/polyaxon-"), res.Data.Path)
		paths = append(paths, res.Data.Path)
	}
	nothingLeftHere("uploaded backups")
	older, newer := paths[0], paths[1]
	olderKey := strings.TrimPrefix(older, "s3://backups/")
	keys := bucketKeys(t, root, "backups", olderKey+"/")
	assert.Contains(t, keys, olderKey+"/manifest.json")
	assert.Contains(t, keys, olderKey+"/secrets.json.age")
	assert.NotContains(t, keys, olderKey+"/secrets.json", "the Secrets leave this machine sealed only")

	code, out, errs = runIt("backup", "list", "--dir", "s3://backups/polyaxon", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	var listed struct {
		Data struct {
			Backups []struct{ Path, Status string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed.Data.Backups, 2)
	assert.Equal(t, newer, listed.Data.Backups[0].Path, "newest first")
	assert.Equal(t, "ok", listed.Data.Backups[0].Status)
	assert.Equal(t, "ok", listed.Data.Backups[1].Status)

	code, out, errs = runIt("backup", "verify", "s3://backups/polyaxon/latest", "--full", "--identity", keyFile, "-o", "json")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, newer, "latest is the newest finished backup")
	nothingLeftHere("verify")

	// A forged manifest naming a file outside the backup: refused, nothing written there.
	forged := `{"formatVersion":1,"source":"local","database":"polyaxon","dumpFile":"../../../escaped","dumpSize":1,"sha256":"x"}`
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("backups"), Key: aws.String("polyaxon/forged/manifest.json"), Body: strings.NewReader(forged)})
	require.NoError(t, err)
	code, out, errs = runIt("backup", "verify", "s3://backups/polyaxon/forged")
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, "must be a plain file name")
	assert.NoFileExists(t, filepath.Join(filepath.Dir(tmp), "escaped"))
	nothingLeftHere("a forged manifest")
	_, err = root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("backups"), Key: aws.String("polyaxon/forged/manifest.json")})
	require.NoError(t, err)

	// The newer backup's sealed dump changed in the bucket, its size kept.
	newerKey := strings.TrimPrefix(newer, "s3://backups/")
	var dumpKey string
	for _, k := range bucketKeys(t, root, "backups", newerKey+"/") {
		if strings.Contains(k, backup.DumpBaseName) {
			dumpKey = k
		}
	}
	require.NotEmpty(t, dumpKey)
	file := filepath.Join(store.DataDir, "backups", dumpKey)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(file, b, 0o644))

	code, out, errs = runIt("backup", "list", "--dir", "s3://backups/polyaxon", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	assert.Equal(t, "damaged", listed.Data.Backups[0].Status)
	assert.Equal(t, "ok", listed.Data.Backups[1].Status)
	code, out, errs = runIt("backup", "verify", newer, "--identity", keyFile)
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, "changed in the bucket after it was uploaded")
	// Written again through the API, the store's checksum is new: the manifest's sha256 still
	// tells.
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("backups"), Key: aws.String(dumpKey), Body: strings.NewReader(string(b))})
	require.NoError(t, err)
	code, out, errs = runIt("backup", "verify", newer, "--identity", keyFile)
	assert.NotEqual(t, 0, code, out+errs)
	assert.Contains(t, errs, "the manifest recorded")

	_, err = s.Psql(ctx, s.Database, "DELETE FROM metrics")
	require.NoError(t, err)
	emptied, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	code, out, errs = runIt(append([]string{"restore", newer, "--yes", "--identity", keyFile}, local...)...)
	assert.NotEqual(t, 0, code, out+errs)
	got, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, emptied, got, "a changed backup restores nothing")
	nothingLeftHere("a refused restore")

	code, out, errs = runIt(append([]string{"restore", older, "--yes", "--identity", keyFile}, local...)...)
	require.Equal(t, 0, code, out+errs)
	got, err = pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the database is back from the bucket")
	nothingLeftHere("restore")

	// An upload that stopped (no manifest) is listed, left alone by prune, never "latest".
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("backups"), Key: aws.String("polyaxon/polyaxon-20991231T000000Z/database.dump.s2.age"), Body: strings.NewReader("part")})
	require.NoError(t, err)
	code, out, errs = runIt("backup", "prune", "--dir", "s3://backups/polyaxon", "--keep-last", "1", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	code, out, errs = runIt("backup", "list", "--dir", "s3://backups/polyaxon", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	var statuses []string
	for _, b := range listed.Data.Backups {
		statuses = append(statuses, b.Path+" "+b.Status)
	}
	// Prune reads the newest backup before it counts: the damaged one is left alone and not
	// counted, so the good one behind it stays.
	assert.ElementsMatch(t, []string{"s3://backups/polyaxon/polyaxon-20991231T000000Z incomplete", newer + " damaged", older + " ok"}, statuses)
	assert.NotEmpty(t, bucketKeys(t, root, "backups", olderKey+"/"), "the only good backup is kept")
}

// A scheduled backup prunes the bucket it went to: `backup` with the CronJob's own arguments
// (charts/polyaxon/templates/backup/cronjob.yaml: --namespace, --release, --dir s3://...,
// --encrypt-to, --keep-last, --output=json), run four times against a real PostgreSQL and a
// real S3 store (versitygw), keeps the newest two. The older backups' objects are gone from the
// bucket, every object of the two kept is there (each file their manifest names, the manifest
// last), and both verify whole with the private key.
func TestScheduledBackupPrunesTheBucketCLI(t *testing.T) {
	ctx := context.Background()
	s, _, runIt := localBackupCLI(t, 50)
	store := s3test.New(t)
	require.NoError(t, store.CreateUser(ctx, "team", "team-secret-key"))
	require.NoError(t, store.CreateBucket(ctx, "backups", "team"))
	setEnv(t, store.Env("team", "team-secret-key"))
	t.Setenv("TMPDIR", t.TempDir())
	root := store.RootClient()
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	require.NoError(t, os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600))

	const keepLast = 2
	// The CronJob's arguments, in its form; --local and the server's address stand for the
	// in-cluster database the pod reaches.
	scheduled := []string{"backup", "--namespace=polyaxon", "--release=polyaxon", "--dir=s3://backups/polyaxon",
		"--encrypt-to=" + key.Recipient().String(), "--keep-last=" + strconv.Itoa(keepLast), "--output=json",
		"--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir}
	// backupsInBucket is the backups' names (their prefixes under polyaxon/) the bucket holds.
	backupsInBucket := func() []string {
		seen := map[string]bool{}
		var names []string
		for _, k := range bucketKeys(t, root, "backups", "polyaxon/") {
			name, _, _ := strings.Cut(strings.TrimPrefix(k, "polyaxon/"), "/")
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
		return names
	}

	var taken []string // backups' locations, oldest first
	for i := range keepLast + 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond) // backups are named to the second
		}
		code, out, errs := runIt(scheduled...)
		require.Equal(t, 0, code, out+errs)
		var res struct{ Data struct{ Path string } }
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.True(t, strings.HasPrefix(res.Data.Path, "s3://backups/polyaxon/polyaxon-"), res.Data.Path)
		taken = append(taken, res.Data.Path)
		// Each backup prunes after itself: once there are more than keepLast, the oldest goes.
		kept, before := min(i+1, keepLast), min(i+1, keepLast+1)
		assert.Contains(t, errs, "Pruned "+strconv.Itoa(before-kept)+" of "+strconv.Itoa(before)+" backups in s3://backups/polyaxon", "backup %d", i+1)
		assert.Len(t, backupsInBucket(), kept, "after backup %d the bucket holds the newest %d", i+1, kept)
	}
	t.Logf("backups taken: %v; in the bucket: %v", taken, backupsInBucket())

	name := func(loc string) string { return strings.TrimPrefix(loc, "s3://backups/polyaxon/") }
	newest := taken[len(taken)-keepLast:]
	assert.ElementsMatch(t, []string{name(newest[0]), name(newest[1])}, backupsInBucket(), "only the newest backups are left")
	for _, old := range taken[:len(taken)-keepLast] {
		assert.Empty(t, bucketKeys(t, root, "backups", "polyaxon/"+name(old)+"/"), "the pruned backup %s leaves no object behind", old)
	}
	for _, loc := range newest {
		prefix := "polyaxon/" + name(loc) + "/"
		got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("backups"), Key: aws.String(prefix + backup.ManifestFile)})
		require.NoError(t, err, loc)
		var m backup.Manifest
		require.NoError(t, json.NewDecoder(got.Body).Decode(&m), loc)
		got.Body.Close()
		want := []string{prefix + backup.ManifestFile}
		for _, f := range m.StoredFiles() {
			want = append(want, prefix+f)
		}
		require.NotEmpty(t, m.StoredFiles(), loc)
		assert.ElementsMatch(t, want, bucketKeys(t, root, "backups", prefix), "%s is complete in the bucket", loc)
		code, out, errs := runIt("backup", "verify", loc, "--full", "--identity", keyFile, "-o", "json")
		assert.Equal(t, 0, code, "%s verifies whole: %s", loc, out+errs)
	}
	code, out, errs := runIt("backup", "list", "--dir", "s3://backups/polyaxon", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	var listed struct {
		Data struct {
			Backups []struct{ Path, Status string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	var statuses []string
	for _, b := range listed.Data.Backups {
		statuses = append(statuses, b.Path+" "+b.Status)
	}
	assert.Equal(t, []string{newest[1] + " ok", newest[0] + " ok"}, statuses, "newest first")
}
