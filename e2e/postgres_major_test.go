package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const nsPGMajor = "pg-major"

// TestPostgresMajorUpgrade: `upgrade --allow-postgres-major-upgrade` from Postgres 16
// to 17 dumps the database, verifies the dump, starts the new server on a new volume
// (data-pg17), restores the dump into it, runs the migrations there, then applies the release.
//
// How the local cluster stands for two servers: the simulated Postgres pod is answered by a
// real PostgreSQL on this machine, and which one follows the pod's data volume, as it would on
// a real cluster: the pod mounting data-pg16 reaches the "old" server (seeded), the pod
// mounting data-pg17 a second, empty server (volumeRouter rewrites the libpq service file the
// pods' client programs read). Both servers run this machine's PostgreSQL (Debian has one
// major version): what is under test is the installer's data path across the switch (a real
// dump out of the old server, a real restore into an empty new one, migrations on the new one,
// the old volume left as it was), not PostgreSQL's own cross-version dump compatibility.
func TestPostgresMajorUpgrade(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	target := nextVersion(t, 1)
	ctx := ctxT(t, 3*time.Minute)
	const db = "pg_major"
	old, err := pgtest.Start(ctx, pgtest.WithFastUnsafe())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, old.Close()) })
	require.NoError(t, old.CreateDatabase(ctx, db))
	next, err := pgtest.Start(ctx, pgtest.WithFastUnsafe(), pgtest.WithUser(old.User), pgtest.WithPassword(old.Password()), pgtest.WithDatabase(db))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, next.Close()) })

	router := &volumeRouter{file: filepath.Join(t.TempDir(), "pg_service.conf"), servers: map[string]*pgtest.Server{"data-pg16": old, "data-pg17": next}}
	require.NoError(t, router.route("data-pg16"))
	pgTarget := local.PostgresTarget{User: old.User, Password: old.Password(), Database: db, BinDir: old.BinDir, ServiceFile: router.file}
	c := newCluster(t, "pgmajor", local.WithClusterExec(local.PostgresTargetExec(nsPGMajor, pgTarget), local.MigrationExec(nsPGMajor, pgTarget)),
		local.WithPodCommands())
	cs := c.Clientset
	router.start(t, cs, nsPGMajor)

	require.NoError(t, pgtest.Seed(ctx, old, db, pgtest.SeedSpec{Runs: seedRuns}))
	seeded := checksumsOn(t, old, db)
	c.deploy(t, "install", "-n", nsPGMajor, "--profile", "production").requireExit(t, 0)
	require.Equal(t, []string{"data-pg16"}, router.history(), "the Postgres pod mounts the 16 volume and reaches the old server")

	backups := t.TempDir()
	res := c.deploy(t, "upgrade", "-n", nsPGMajor, "--chart", bumpedChart(t, target), "--set", "postgresql.image.tag=17.2",
		"--allow-postgres-major-upgrade", "-f", migrationValues(t, recordMigration(target)), "--backup-dir", backups, "-o", "json").requireExit(t, 0)
	var d upgradeData
	res.data(t, &d)
	var major struct {
		PostgresMajor *struct{ From, To string } `json:"postgresMajorUpgrade"`
	}
	res.data(t, &major)
	require.NotNil(t, major.PostgresMajor)
	assert.Equal(t, "16", major.PostgresMajor.From)
	assert.Equal(t, "17", major.PostgresMajor.To)
	order := []string{"backup", "verify backup", "postgres new volume", "postgres restore", "migrate", "apply"}
	last := -1
	for _, p := range order {
		i := d.phaseIndex(p)
		require.GreaterOrEqualf(t, i, 0, "phase %q in %+v", p, d.Phases)
		assert.Equalf(t, "ok", d.Phases[i].Status, "phase %q", p)
		assert.Greaterf(t, i, last, "phase %q in order %v", p, d.Phases)
		last = i
	}

	t.Run("the new server holds the dump, then the migration", func(t *testing.T) {
		assert.Equal(t, []string{"data-pg16", "data-pg17"}, router.history(), "the new Postgres pod mounts the 17 volume")
		assert.Equal(t, seeded, checksumsOn(t, next, db), "every table restored into the new server")
		assert.Equal(t, []string{target}, appliedMigrations(t, next, db), "the migration ran on the new server")
	})

	t.Run("the old server and its volume are left as they were", func(t *testing.T) {
		assert.Equal(t, seeded, checksumsOn(t, old, db))
		assert.Empty(t, appliedMigrations(t, old, db), "the old server was not migrated")
		for _, claim := range []string{"data-pg16-polyaxon-postgresql-0", "data-pg17-polyaxon-postgresql-0"} {
			_, err := cs.CoreV1().PersistentVolumeClaims(nsPGMajor).Get(ctxT(t, time.Minute), claim, metav1.GetOptions{})
			assert.NoError(t, err, "claim %s", claim)
		}
	})

	t.Run("the release runs Postgres 17 on the new volume", func(t *testing.T) {
		sts, err := cs.AppsV1().StatefulSets(nsPGMajor).Get(ctxT(t, time.Minute), "polyaxon-postgresql", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
		assert.Equal(t, "data-pg17", sts.Spec.VolumeClaimTemplates[0].Name)
		assert.True(t, slices.ContainsFunc(sts.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return strings.HasSuffix(c.Image, ":17.2") }),
			"the postgresql container runs 17.2")
		assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, cs, nsPGMajor))
		requireWorkloadsReady(t, cs, nsPGMajor, 2*time.Minute)
		requireImagesAt(t, cs, nsPGMajor, target)
	})

	t.Run("a backup now reads the new server", func(t *testing.T) {
		dir := t.TempDir()
		c.deploy(t, "backup", "-n", nsPGMajor, "--dir", dir).requireExit(t, 0)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		// Restored elsewhere, the dump has the migration only the new server has.
		ctx := ctxT(t, 2*time.Minute)
		require.NoError(t, next.CreateDatabase(ctx, "restored"))
		local := backup.NewLocalTarget(backup.Conn{Host: next.Host, Port: next.Port, User: next.User, Password: next.Password(), Database: "restored"},
			backup.WithLocalBinDir(next.BinDir))
		_, err = backup.Restore(ctx, local, filepath.Join(dir, entries[0].Name()), backup.WithToolsDir(next.BinDir))
		require.NoError(t, err)
		assert.Equal(t, []string{target}, appliedMigrations(t, next, "restored"))
		assert.Equal(t, seeded, checksumsOn(t, next, "restored"))
	})
}

// checksumsOn is pgtest.Checksums of database db of pg.
func checksumsOn(t *testing.T, pg *pgtest.Server, db string) map[string]string {
	t.Helper()
	sums, err := pgtest.Checksums(ctxT(t, 2*time.Minute), pg, db)
	require.NoError(t, err)
	require.Len(t, sums, len(pgtest.Tables))
	return sums
}

// volumeRouter points the libpq service file the Postgres pod's client programs read at the
// server of the data volume the pod mounts now.
type volumeRouter struct {
	file    string
	servers map[string]*pgtest.Server // by volume name (the claim template: data-pg16, data-pg17)

	mu     sync.Mutex
	routed []string
}

func (r *volumeRouter) route(volume string) error {
	s := r.servers[volume]
	if s == nil {
		return fmt.Errorf("no server for volume %s", volume)
	}
	conf := fmt.Sprintf("[%s]\nhost=%s\nport=%d\n", local.PostgresService, s.Host, s.Port)
	tmp := r.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, r.file); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.routed); n == 0 || r.routed[n-1] != volume {
		r.routed = append(r.routed, volume)
	}
	return nil
}

// history lists the volumes routed to, in order.
func (r *volumeRouter) history() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.routed...)
}

// start follows the Postgres pod of ns until the test ends. A new pod is routed when it is
// created, long before it is Ready and the installer can exec into it.
func (r *volumeRouter) start(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p, err := cs.CoreV1().Pods(ns).Get(ctx, local.PostgresPod, metav1.GetOptions{})
			if err != nil || p.DeletionTimestamp != nil {
				continue
			}
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && r.servers[v.Name] != nil {
					if err := r.route(v.Name); err != nil {
						t.Errorf("route %s: %v", v.Name, err)
					}
				}
			}
		}
	}()
}
