package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// TestDisasterRestoreFromTheBucket (issue 56 item 4): the disaster case with Polyaxon's own
// programs. The bucket is a versitygw on this machine (s3test), outside both clusters, as a
// cloud's bucket is. Cluster A (the local provider: its control plane, haupt's API and the
// agent as host programs, and a PostgreSQL server of its own behind the Postgres pod) gets the
// release; Polyaxon's CLI makes two projects and four runs (three succeeded, one failed); a
// sealed backup goes to s3://polyaxon-dr/prod. Then cluster A is deleted: its control plane
// and programs, and its PostgreSQL server stopped and its data directory removed.
//
// Cluster B is new: a new control plane and a NEW PostgreSQL server (a fresh initdb, another
// data directory and port). The release's Secrets, opened from the backup's secrets.json.age
// with the age key, are applied first (the platform's secret key is the old one), the chart is
// installed (the CLI lists no project), and `restore s3://polyaxon-dr/prod/latest` with the key
// brings the rows back: the counts it prints are the backup's, and the API lists the same
// projects and runs, with the same uuids, names and statuses; a new run succeeds. Before
// that, a restore from a location with no backup and one with the wrong age key are refused
// and leave the new database as it was.
func TestDisasterRestoreFromTheBucket(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	start := time.Now()
	ns := nsInstall
	venv, _ := polyaxonPrograms(t)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	hello := filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml")
	failing := filepath.Join(root, "e2e", "testdata", "polyaxonfiles", "unknown-connection.yaml")
	ctx := ctxT(t, 28*time.Minute)
	var timeline []string
	mark := func(what string) {
		line := fmt.Sprintf("%8s  %s", time.Since(start).Round(time.Second), what)
		timeline = append(timeline, line)
		t.Logf("timeline: %s", line)
	}
	t.Cleanup(func() {
		t.Logf("disaster restore timeline (since the test's start):\n%s", strings.Join(timeline, "\n"))
	})

	// The bucket, the team's account and its age key: all off the clusters.
	store := s3test.New(t)
	const bucket, prefix = "polyaxon-dr", "prod"
	const access, secret = "PLATFORMTEAM00000001", "platform-team-secret-0123456789abcdef0123"
	require.NoError(t, store.CreateUser(ctx, access, secret))
	require.NoError(t, store.CreateBucket(ctx, bucket, access))
	bucketEnv := store.Env(access, secret)
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	identity := writeAgeIdentity(t, key)
	location := "s3://" + bucket + "/" + prefix

	installRelease := func(c *testCluster) {
		t.Helper()
		c.deploy(t, "install", "--profile", "production", "--namespace", ns,
			"--set", c.postgresPasswordValue(),
			"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
			"--set", "artifactsStore.persistence.sharedVolume.hostPath.path="+t.TempDir(),
		).requireExit(t, 0)
		requireWorkloadsReady(t, c.Clientset, ns, 6*time.Minute)
	}
	gatewayCLI := func(c *testCluster) *polyaxonCLI {
		t.Helper()
		addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
		require.NoError(t, err)
		return newPolyaxonCLI(t, venv, "http://"+addr)
	}

	// ---- cluster A: the release, its data, a sealed backup in the bucket.
	a := polyaxonCluster(t, "drsource", ns)
	createNamespace(t, a, ns)
	installRelease(a)
	mark("cluster A: release installed and ready")
	cliA := gatewayCLI(a)
	projects := []string{"vision", "nlp"}
	for _, p := range projects {
		_, err := cliA.run(ctx, "project", "create", "--name", p)
		require.NoError(t, err)
	}
	for _, r := range []struct{ project, file, status string }{
		{"vision", hello, "succeeded"}, {"vision", hello, "succeeded"},
		{"nlp", hello, "succeeded"}, {"nlp", failing, "failed"},
	} {
		uuid := cliA.submit(t, ctx, r.file, r.project)
		cliA.waitStatus(t, ctx, r.project, uuid, r.status)
	}
	before := platformData(t, ctx, cliA, projects)
	require.Len(t, before.Runs, 4)
	for _, r := range before.Runs {
		t.Logf("cluster A: run %s/%s %s %s", r.Project, r.UUID, r.Name, r.Status)
	}
	platformKeyA := secretValue(t, a, ns, "polyaxon-platform", "POLYAXON_SECRET_KEY")
	mark("cluster A: 2 projects and 4 runs made through Polyaxon's CLI")

	began := time.Now()
	res := deployWithEnv(t, bucketEnv, a.args([]string{"backup", "-n", ns, "--dir", location, "--encrypt-to", key.Recipient().String(), "-o", "json"})...).requireExit(t, 0)
	var taken struct {
		Path     string
		Verified bool
		Rows     map[string]int64
	}
	res.data(t, &taken)
	require.True(t, strings.HasPrefix(taken.Path, location+"/polyaxon-"), taken.Path)
	require.True(t, taken.Verified)
	require.NotEmpty(t, taken.Rows, "the backup records each table's row count")
	assert.EqualValues(t, 2, taken.Rows["public.db_project"], "the backup's projects")
	assert.EqualValues(t, 4, taken.Rows["public.db_run"], "the backup's runs")
	mark(fmt.Sprintf("backup to %s sealed and uploaded in %s", taken.Path, time.Since(began).Round(100*time.Millisecond)))
	objects := listKeys(t, ctx, store.RootClient(), bucket, prefix+"/")
	t.Logf("the backup's objects in the bucket: %s", strings.Join(objects, ", "))
	backupKey := strings.TrimPrefix(taken.Path, "s3://"+bucket+"/")
	assert.Contains(t, objects, backupKey+"/secrets.json.age")
	assert.NotContains(t, objects, backupKey+"/secrets.json", "the Secrets leave the cluster sealed only")

	// The disaster: cluster A is gone, its database with it.
	pgA := a.pg
	require.NoError(t, a.destroy())
	assert.NoDirExists(t, a.provider.ClusterDir(a.Name), "cluster A's control plane and pods")
	assert.NoDirExists(t, pgA.Dir, "cluster A's PostgreSQL data directory")
	assertNothingListens(t, pgA.Host, pgA.Port, "cluster A's PostgreSQL server")
	mark(fmt.Sprintf("cluster A deleted: control plane, programs, PostgreSQL server on port %d and its data directory %s", pgA.Port, pgA.DataDir))

	// ---- cluster B: new everything; the user's age key and bucket keys are all that is left.
	// The new Postgres is started with the password of the restored Secret, as the chart's
	// Postgres pod initialises its new volume with polyaxon-postgresql's.
	secrets := openBackupSecrets(t, ctx, store.Client(access, secret), bucket, backupKey, key)
	password := string(secretFromList(t, secrets, "polyaxon-postgresql").Data["postgres-password"])
	require.NotEmpty(t, password, "secrets.json holds the database password")
	b := polyaxonClusterWith(t, "drtarget", ns, []pgtest.Option{pgtest.WithPassword(password)})
	require.NotEqual(t, pgA.DataDir, b.pg.DataDir)
	t.Logf("cluster B's PostgreSQL: a new server (initdb) on port %d, data directory %s", b.pg.Port, b.pg.DataDir)
	mark("cluster B up (new control plane, new PostgreSQL server)")
	createNamespace(t, b, ns)
	var applied []string
	for _, s := range secrets.Items {
		s.Namespace, s.ResourceVersion, s.UID = ns, "", ""
		_, err := b.Clientset.CoreV1().Secrets(ns).Create(ctx, &s, metav1.CreateOptions{})
		require.NoError(t, err, "Secret %s from the backup", s.Name)
		applied = append(applied, s.Name)
	}
	t.Logf("Secrets applied from the backup's secrets.json.age: %s", strings.Join(applied, ", "))
	installRelease(b)
	mark("cluster B: the chart installed fresh and ready")
	assert.Equal(t, platformKeyA, secretValue(t, b, ns, "polyaxon-platform", "POLYAXON_SECRET_KEY"), "the new release keeps the old platform key")
	cliB := gatewayCLI(b)
	empty := platformData(t, ctx, cliB, nil)
	assert.Empty(t, empty.Projects, "the new release's database has no project")
	out, err := cliB.run(ctx, "project", "ls")
	require.NoError(t, err)
	t.Logf("polyaxon project ls on cluster B before the restore:\n%s", strings.TrimSpace(out))
	for _, p := range projects {
		assert.NotContains(t, out, p, "the CLI lists no project of cluster A before the restore")
	}
	fresh := databaseState(t, b.pg)

	restore := func(args ...string) cmdResult {
		return deployWithEnv(t, bucketEnv, b.args(append([]string{"restore", "-n", ns, "--yes", "-o", "json"}, args...))...)
	}
	t.Run("a location with no backup is refused and the new database is untouched", func(t *testing.T) {
		res := restore("s3://"+bucket+"/nothing-here/latest", "--identity", identity)
		assert.NotEqual(t, 0, res.Code, "%s", res)
		assert.Contains(t, res.Stderr, "no finished backup under s3://"+bucket+"/nothing-here", "%s", res)
		t.Logf("restore from a prefix without a backup: exit %d: %s", res.Code, lastLines(strings.TrimSpace(res.Stderr), 3))
		assert.Equal(t, fresh, databaseState(t, b.pg))
	})
	t.Run("the wrong age key is refused and the new database is untouched", func(t *testing.T) {
		other, err := age.GenerateX25519Identity()
		require.NoError(t, err)
		res := restore(location+"/latest", "--identity", writeAgeIdentity(t, other))
		assert.NotEqual(t, 0, res.Code, "%s", res)
		assert.Contains(t, res.Stderr, "opening database.dump.s2.age: identity did not match any of the recipients", "%s", res)
		t.Logf("restore with the wrong age key: exit %d: %s", res.Code, lastLines(strings.TrimSpace(res.Stderr), 3))
		assert.Equal(t, fresh, databaseState(t, b.pg))
		requireWorkloadsReady(t, b.Clientset, ns, 4*time.Minute)
	})

	began = time.Now()
	res = restore(location+"/latest", "--identity", identity).requireExit(t, 0)
	restoredAt := time.Now()
	var restored struct {
		Path       string
		Backup     string
		Way        string
		Rows       map[string]int64
		BackupRows map[string]int64
	}
	res.data(t, &restored)
	mark(fmt.Sprintf("restore of %s (%s) done in %s (%s)", restored.Path, taken.Path, restoredAt.Sub(began).Round(100*time.Millisecond), restored.Way))
	assert.Equal(t, location+"/latest", restored.Path)
	assert.Equal(t, taken.Path, restored.Backup, "the JSON names the backup latest resolved to")
	assert.Contains(t, res.Stderr, "Restoring "+taken.Path+" into pod", "latest is the backup taken on cluster A")
	assert.Equal(t, taken.Rows, restored.BackupRows, "the rows the restore read from the manifest are the backup's")
	assert.Equal(t, restored.BackupRows, restored.Rows, "every table has the row count the backup recorded")
	for _, table := range []string{"db_project", "db_run"} {
		got, err := b.pg.Psql(ctx, "polyaxon", "SELECT count(*) FROM "+table)
		require.NoError(t, err)
		assert.Equalf(t, fmt.Sprint(taken.Rows["public."+table]), strings.TrimSpace(got), "rows of %s in cluster B's new server", table)
	}
	logRowCounts(t, taken.Rows, restored.Rows)

	// The first read of the API that sees the old data.
	requireWorkloadsReady(t, b.Clientset, ns, 4*time.Minute)
	cliB = gatewayCLI(b)
	waitFor(t, 4*time.Minute, "the API lists cluster A's projects", func(ctx context.Context) (bool, string, error) {
		d, err := readPlatformData(ctx, cliB, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(d.Projects) == len(before.Projects), fmt.Sprint(d.Projects), nil
	})
	mark(fmt.Sprintf("first API read with the restored data, %s after the restore", time.Since(restoredAt).Round(100*time.Millisecond)))

	t.Run("the API and the CLI list the same projects and runs, with the same uuids and statuses", func(t *testing.T) {
		after := platformData(t, ctx, cliB, projects)
		assert.Equal(t, before, after)
		for _, p := range projects {
			out, err := cliB.run(ctx, "ops", "ls", "-p", p)
			require.NoError(t, err)
			for _, r := range before.Runs {
				if r.Project == p {
					assert.Containsf(t, out, r.UUID[:8], "polyaxon ops ls -p %s lists run %s", p, r.UUID)
				}
			}
		}
	})
	t.Run("the restored platform runs a new run", func(t *testing.T) {
		uuid := cliB.submit(t, ctx, hello, "vision")
		cliB.waitStatus(t, ctx, "vision", uuid, "succeeded")
		mark("a new run on cluster B succeeded")
	})
	t.Logf("TestDisasterRestoreFromTheBucket: %s in all", time.Since(start).Round(time.Second))
}

// drProject and drRun are what the API says of a project and a run.
type drProject struct{ UUID, Name string }
type drRun struct{ Project, UUID, Name, Status string }

// drData are the projects and the runs of the given projects, sorted.
type drData struct {
	Projects []drProject
	Runs     []drRun
}

func platformData(t *testing.T, ctx context.Context, cli *polyaxonCLI, projects []string) drData {
	t.Helper()
	d, err := readPlatformData(ctx, cli, projects)
	require.NoError(t, err)
	return d
}

// readPlatformData reads the projects list and each given project's runs from the API.
func readPlatformData(ctx context.Context, cli *polyaxonCLI, projects []string) (drData, error) {
	var d drData
	var ps struct {
		Results []struct {
			UUID string `json:"uuid"`
			Name string `json:"name"`
		} `json:"results"`
	}
	if err := cli.get(ctx, "/api/v1/default/projects/list?limit=100", &ps); err != nil {
		return d, err
	}
	for _, p := range ps.Results {
		d.Projects = append(d.Projects, drProject{UUID: p.UUID, Name: p.Name})
	}
	for _, p := range projects {
		var rs struct {
			Results []struct {
				UUID   string `json:"uuid"`
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"results"`
		}
		if err := cli.get(ctx, "/api/v1/default/"+p+"/runs?limit=100", &rs); err != nil {
			return d, err
		}
		for _, r := range rs.Results {
			d.Runs = append(d.Runs, drRun{Project: p, UUID: r.UUID, Name: r.Name, Status: r.Status})
		}
	}
	sort.Slice(d.Projects, func(i, j int) bool { return d.Projects[i].Name < d.Projects[j].Name })
	sort.Slice(d.Runs, func(i, j int) bool { return d.Runs[i].UUID < d.Runs[j].UUID })
	return d, nil
}

// writeAgeIdentity writes key as age-keygen does, in a file only its owner reads.
func writeAgeIdentity(t *testing.T, key *age.X25519Identity) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "backup-key.txt")
	require.NoError(t, os.WriteFile(f, []byte(key.String()+"\n"), 0o600))
	return f
}

// openBackupSecrets is the backup's secrets.json.age, read from the bucket and opened with key
// (what `age -d -i backup-key.txt secrets.json.age` gives a user).
func openBackupSecrets(t *testing.T, ctx context.Context, client *s3.Client, bucket, backupKey string, key *age.X25519Identity) corev1.SecretList {
	t.Helper()
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(backupKey + "/secrets.json.age")})
	require.NoError(t, err)
	defer obj.Body.Close()
	plain, err := age.Decrypt(obj.Body, key)
	require.NoError(t, err)
	b, err := io.ReadAll(plain)
	require.NoError(t, err)
	var list corev1.SecretList
	require.NoError(t, json.Unmarshal(b, &list))
	require.NotEmpty(t, list.Items)
	return list
}

func secretFromList(t *testing.T, list corev1.SecretList, name string) corev1.Secret {
	t.Helper()
	for _, s := range list.Items {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Secret %s in the backup's secrets.json", name)
	return corev1.Secret{}
}

func secretValue(t *testing.T, c *testCluster, ns, name, key string) string {
	t.Helper()
	s, err := c.Clientset.CoreV1().Secrets(ns).Get(ctxT(t, time.Minute), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmptyf(t, s.Data[key], "Secret %s/%s key %s", ns, name, key)
	return string(s.Data[key])
}

// databaseState is every table of database polyaxon with its exact row count, and an md5 of
// its projects and runs: a restore that changed anything changes it.
func databaseState(t *testing.T, pg *pgtest.Server) string {
	t.Helper()
	out, err := pg.Psql(ctxT(t, time.Minute), "polyaxon", `SELECT coalesce(string_agg(t.table_name || '=' ||
		(xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I.%I', t.table_schema, t.table_name), false, true, '')))[1]::text,
		',' ORDER BY t.table_name), '') || ' ' || coalesce((SELECT md5(string_agg(r, '|' ORDER BY r)) FROM (
			SELECT 'project ' || uuid || ' ' || name AS r FROM db_project
			UNION ALL SELECT 'run ' || uuid || ' ' || coalesce(name, '') || ' ' || coalesce(status, '') FROM db_run) rows), 'none')
		FROM information_schema.tables t WHERE t.table_schema = 'public' AND t.table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	state := strings.TrimSpace(out)
	require.Contains(t, state, "db_run=", "the migrated schema")
	return state
}

// logRowCounts logs the tables with rows, as the backup counted them and as the restore did.
func logRowCounts(t *testing.T, backup, restored map[string]int64) {
	var lines []string
	var total int64
	for table, n := range backup {
		total += n
		if n > 0 {
			lines = append(lines, fmt.Sprintf("%-40s backup %6d  restored %6d", table, n, restored[table]))
		}
	}
	sort.Strings(lines)
	t.Logf("row counts (%d tables, %d rows; the tables with rows):\n%s", len(backup), total, strings.Join(lines, "\n"))
}

// assertNothingListens: no server answers at host:port any more.
func assertNothingListens(t *testing.T, host string, port int, what string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", host, port), 2*time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Errorf(t, err, "%s still answers at %s:%d", what, host, port)
}
