package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// oldestPolyaxon is the oldest Polyaxon the chart supports whose programs make deps installs
// (e2e/polyaxon/requirements-2.15.1.txt): where the upgrade scenario starts.
const oldestPolyaxon = "2.15.1"

// TestPolyaxonVersionUpgrade: an official-chart install adopted, then upgraded onto the
// chart's Polyaxon, every step through Polyaxon's own programs. A release of the official
// chart's shape at 2.15.1 (e2e/testdata/official-shaped, installed with plain Helm, its own
// PostgreSQL) runs the real 2.15.1 API, agent and operator stand-in; a project and a run are
// made through the 2.15.1 CLI. `adopt` moves it onto ours keeping 2.15.1, and the API of ours
// serves the same data. An upgrade whose migrate fails leaves 2.15.1 serving; `upgrade
// --profile production` to the chart's appVersion then takes and verifies the backup, runs the
// new version's own migrate, and the new CLI lists the same project and run with the same
// status; rollback to the adopted revision and restore bring 2.15.1 back with the backup's data.
func TestPolyaxonVersionUpgrade(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns := nsInstall
	start := time.Now()
	// The old release's database is a server of its own, as its Bitnami volume is; ours is
	// another. Their password is the same: adopt carries the old release's into ours.
	oldPG, err := pgtest.Start(ctxT(t, 3*time.Minute), pgtest.WithFastUnsafe(), pgtest.WithDatabase("polyaxon"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = oldPG.Close() })
	c := polyaxonClusterWith(t, "pxupgrade", ns, []pgtest.Option{pgtest.WithPassword(oldPG.Password())},
		local.WithHostBackend(ns, oldPostgres, 5432, fmt.Sprintf("%s:%d", oldPG.Host, oldPG.Port)),
		local.WithClusterExec(bitnamiExec(oldPG, "polyaxon", ns)))
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	ctx := ctxT(t, 20*time.Minute)
	timing := func(step string, since time.Time) {
		t.Logf("step %-34s %s", step, time.Since(since).Round(100*time.Millisecond))
	}

	// The official chart's release, as a team installed it: its own PostgreSQL, a password of
	// their own (user and database at the chart's defaults).
	step := time.Now()
	helmInstall(t, c, ns, oldRelease, officialChart(t, "", true), map[string]any{"postgresql": map[string]any{"auth": map[string]any{
		"username": oldPG.User, "database": "polyaxon", "password": oldPG.Password(), "postgresPassword": oldPG.Password(),
	}}}, false)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	addr, err := local.ServiceAddress(c.Cluster, ns, oldRelease+"-polyaxon-gateway", 80)
	require.NoError(t, err)
	official := newPolyaxonCLI(t, local.PolyaxonVenv(oldestPolyaxon), "http://"+addr)
	require.Equal(t, oldestPolyaxon, apiVersion(t, official), "the official release's gateway runs haupt %s", oldestPolyaxon)
	timing("official release serving", step)

	step = time.Now()
	_, err = official.run(ctx, "project", "create", "--name", "before-upgrade")
	require.NoError(t, err)
	uuid := official.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "before-upgrade")
	official.waitStatus(t, ctx, "before-upgrade", uuid, "succeeded")
	checksum := dataChecksumOf(t, oldPG)
	timing("data made with the 2.15.1 CLI", step)

	// The local provider runs no Celery or Redis: the API does the scheduler's work itself.
	common := []string{"--profile", "production", "--namespace", ns, "--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false"}

	step = time.Now()
	var adopted upgradeData
	res := c.deploy(t, append([]string{"adopt", "--from-release", oldRelease, "--backup-dir", t.TempDir(), "-o", "json"}, common...)...).requireExit(t, 0)
	res.data(t, &adopted)
	assert.Contains(t, res.Stderr, "Polyaxon "+oldestPolyaxon+" of release "+ns+"/"+oldRelease+" is kept")
	for _, p := range adopted.Phases {
		t.Logf("adopt phase %-20s %s %s", p.Phase, p.Status, p.Took)
	}
	timing("adopt", step)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

	addr, err = local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	ours := newPolyaxonCLI(t, local.PolyaxonVenv(oldestPolyaxon), "http://"+addr)
	t.Run("the adopted release serves the official release's data at 2.15.1", func(t *testing.T) {
		r := res.result(t)
		require.NotNil(t, r.Release)
		assert.Equal(t, oldestPolyaxon, r.Release.AppVersion, "adopt keeps the Polyaxon of the old release")
		requireImagesAt(t, c.Clientset, ns, oldestPolyaxon)
		assert.Equal(t, oldestPolyaxon, apiVersion(t, ours), "our gateway runs haupt %s", oldestPolyaxon)
		st, _, err := ours.statuses(ctx, "before-upgrade", uuid)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", st, "the run made on the official release")
		out, err := ours.run(ctx, "ops", "ls", "-p", "before-upgrade")
		require.NoError(t, err)
		assert.Contains(t, out, uuid[:8])
		assert.Equal(t, checksum, dataChecksum(t, c), "the projects and runs of the official release, in ours' database")
	})

	// The adopted release keeps 2.15.1 (polyaxon.version, stored with it): the upgrade asks for
	// the chart's own Polyaxon.
	common = append(common, "--set", "polyaxon.version="+installedVersion(t))

	t.Run("a migration that fails leaves 2.15.1 serving with its data", func(t *testing.T) {
		// The new version brings no migration 2.15.1 lacks (haupt/db/pgsql/db/migrations are
		// the same), so the fault is the database's: its record of db.0016 is gone while its
		// columns stay, and the new version's migrate fails re-adding them.
		const migration = "0016_project_user_projectversion_user"
		_, err := c.pg.Psql(ctx, "polyaxon", "DELETE FROM django_migrations WHERE app = 'db' AND name = '"+migration+"'")
		require.NoError(t, err)
		c.deploy(t, append([]string{"upgrade", "--backup-dir", t.TempDir()}, common...)...).requireExit(t, 1)
		assert.Contains(t, jobPodLogs(t, c, ns, "migrations"), "already exists", "haupt's migrate failed on db.%s", migration)
		assert.Equal(t, map[int]string{1: "deployed"}, helmRevisions(t, c.Clientset, ns), "no Helm revision was made")
		assert.Equal(t, oldestPolyaxon, apiVersion(t, ours), "haupt %s still serves", oldestPolyaxon)
		st, _, err := ours.statuses(ctx, "before-upgrade", uuid)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", st)
		assert.Equal(t, checksum, dataChecksum(t, c), "the projects and runs are intact")
		_, err = c.pg.Psql(ctx, "polyaxon", "INSERT INTO django_migrations (app, name, applied) SELECT 'db', '"+migration+"', now() WHERE NOT EXISTS (SELECT 1 FROM django_migrations WHERE app = 'db' AND name = '"+migration+"')")
		require.NoError(t, err)
	})

	step = time.Now()
	backups := t.TempDir()
	var d upgradeData
	res = c.deploy(t, append([]string{"upgrade", "--backup-dir", backups, "-o", "json"}, common...)...).requireExit(t, 0)
	res.data(t, &d)
	r := res.result(t)
	require.NotNil(t, r.Release)
	assert.Equal(t, installedVersion(t), r.Release.AppVersion)
	for _, p := range []string{"backup", "verify backup", "migrate", "apply"} {
		i := d.phaseIndex(p)
		require.GreaterOrEqualf(t, i, 0, "phase %q in %+v", p, d.Phases)
		assert.Equalf(t, "ok", d.Phases[i].Status, "phase %q", p)
		t.Logf("upgrade phase %-14s %s", p, d.Phases[i].Took)
	}
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	timing("upgrade to "+installedVersion(t), step)

	t.Run("the backup is of the old version, and verifies", func(t *testing.T) {
		m, err := backup.ReadManifest(d.BackupDir)
		require.NoError(t, err)
		assert.Equal(t, oldestPolyaxon, m.AppVersion, "taken from the 2.15.1 release")
		c.deploy(t, "backup", "verify", d.BackupDir).requireExit(t, 0)
	})

	t.Run("the new version's own migrations ran", func(t *testing.T) {
		logs := jobPodLogs(t, c, ns, "migrations")
		assert.Regexp(t, `Operations to perform|No migrations to apply`, logs)
	})

	addr, err = local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cur := newPolyaxonCLI(t, local.PolyaxonVenv(installedVersion(t)), "http://"+addr)
	t.Run("the API answers at the new version with the old data", func(t *testing.T) {
		assert.Equal(t, installedVersion(t), apiVersion(t, cur))
		var projects struct {
			Results []struct {
				Name string `json:"name"`
			} `json:"results"`
		}
		require.NoError(t, cur.get(ctx, "/api/v1/default/projects/list", &projects))
		var names []string
		for _, p := range projects.Results {
			names = append(names, p.Name)
		}
		assert.Contains(t, names, "before-upgrade", "the project made before the upgrade is listed after it")
		st, _, err := cur.statuses(ctx, "before-upgrade", uuid)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", st, "the run made before the upgrade keeps its status")
		out, err := cur.run(ctx, "ops", "ls", "-p", "before-upgrade")
		require.NoError(t, err)
		assert.Contains(t, out, uuid[:8], "the new CLI lists the run made with the old one")
	})

	t.Run("rollback and restore of the pre-upgrade backup bring 2.15.1 back with its data", func(t *testing.T) {
		// Data made on the new version, which the restore takes away.
		_, err := cur.run(ctx, "project", "create", "--name", "after-upgrade")
		require.NoError(t, err)
		step := time.Now()
		c.deploy(t, "rollback", "1", "-n", ns).requireExit(t, 0) // the adopted revision
		c.deploy(t, "restore", d.BackupDir, "--yes", "-n", ns).requireExit(t, 0)
		requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

		addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
		require.NoError(t, err)
		back := newPolyaxonCLI(t, local.PolyaxonVenv(oldestPolyaxon), "http://"+addr)
		assert.Equal(t, oldestPolyaxon, apiVersion(t, back), "the rollback runs haupt %s again", oldestPolyaxon)
		st, _, err := back.statuses(ctx, "before-upgrade", uuid)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", st)

		m, err := backup.ReadManifest(d.BackupDir)
		require.NoError(t, err)
		require.NotEmpty(t, m.Rows, "the manifest counts the rows of each table")
		for table, want := range m.Rows {
			got, err := c.pg.Psql(ctx, "polyaxon", fmt.Sprintf("SELECT count(*) FROM %s", table))
			require.NoError(t, err)
			assert.Equalf(t, strconv.FormatInt(want, 10), strings.TrimSpace(got), "rows of %s after the restore", table)
		}
		assert.Equal(t, checksum, dataChecksum(t, c), "projects and runs are those of the backup")
		timing("rollback and restore", step)
	})
	timing("scenario", start)
}

// dataChecksum is an md5 of the release's projects and runs (uuid, name, status), in order.
func dataChecksum(t *testing.T, c *testCluster) string {
	t.Helper()
	return dataChecksumOf(t, c.pg)
}

// dataChecksumOf is dataChecksum of the database polyaxon of pg.
func dataChecksumOf(t *testing.T, pg *pgtest.Server) string {
	t.Helper()
	out, err := pg.Psql(ctxT(t, time.Minute), "polyaxon", `SELECT md5(string_agg(r, '|' ORDER BY r)) FROM (
		SELECT 'project ' || uuid || ' ' || name AS r FROM db_project
		UNION ALL SELECT 'run ' || uuid || ' ' || coalesce(name, '') || ' ' || coalesce(status, '') FROM db_run) rows`)
	require.NoError(t, err)
	sum := strings.TrimSpace(out)
	require.NotEmpty(t, sum)
	return sum
}

// apiVersion is the version the API behind cli says it is.
func apiVersion(t *testing.T, cli *polyaxonCLI) string {
	t.Helper()
	var installation struct {
		Version string `json:"version"`
	}
	require.NoError(t, cli.get(ctxT(t, time.Minute), "/api/v1/installation", &installation))
	return installation.Version
}
