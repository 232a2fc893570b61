package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// sideDatabases lists the databases a restore by swap of db would create beside it.
func sideDatabases(t *testing.T, s *pgtest.Server, db string) []string {
	t.Helper()
	out, err := s.Psql(context.Background(), "postgres",
		fmt.Sprintf(`SELECT datname FROM pg_database WHERE datname LIKE '%s\_restore\_%%' OR datname LIKE '%s\_replaced\_%%'`, db, db))
	require.NoError(t, err)
	return strings.Fields(out)
}

// A local target whose role may create databases is restored in parallel into a new database
// that then takes the target's name; nothing of the swap is left beside it.
func TestRestoreBySwap(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t, "swap")
	// A copy an interrupted restore left behind is named, not touched.
	leftover := f.target.conn.Database + "_restore_1700000000"
	require.NoError(t, f.s.CreateDatabase(ctx, leftover))
	spoolDir := t.TempDir()
	t.Setenv("TMPDIR", spoolDir)
	var log bytes.Buffer
	sc := &fakeScaler{}
	rep, err := Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithJobs(2), WithScaler(sc), WithLogger(testLogger(&log)))
	require.NoError(t, err)
	assert.Contains(t, log.String(), "restoring into a new database")
	assert.Contains(t, log.String(), "jobs=2")
	got, err := pgtest.Checksums(ctx, f.s, f.target.conn.Database)
	require.NoError(t, err)
	assert.Equal(t, f.want, got)
	assert.Equal(t, f.m.Rows, rep.Rows, "the restored copy's row counts are the backup's")
	assert.Equal(t, RestoredBySwap, rep.Way)
	var steps []string
	var total time.Duration
	for _, st := range rep.Steps {
		steps, total = append(steps, st.Step), total+st.Duration
	}
	assert.Equal(t, []string{"read the table of contents", "decode the dump and check its sha256", "scale the writers down",
		"pg_restore --jobs 2 into a new database", "count the rows of every table", "wait for the sessions to end, swap the databases",
		"drop the replaced database"}, steps)
	assert.InDelta(t, rep.Duration.Seconds(), total.Seconds(), 0.05, "the steps add up to the restore")
	assert.Contains(t, log.String(), "databases left by an interrupted restore")
	assert.Contains(t, log.String(), leftover)
	assert.Equal(t, []string{leftover}, sideDatabases(t, f.s, f.target.conn.Database), "only the leftover beside it")
	spooled, err := os.ReadDir(spoolDir)
	require.NoError(t, err)
	assert.Empty(t, spooled, "the spool file is removed")
	assert.Equal(t, 1, sc.downs)
	assert.Equal(t, 1, sc.ups)
	owner, err := f.s.Psql(ctx, "postgres", fmt.Sprintf(`SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '%s'`, f.target.conn.Database))
	require.NoError(t, err)
	assert.Equal(t, f.s.User, owner)
}

// failingRestoreTools is a directory with psql and a pg_restore that restores, then fails: the
// worst moment for a restore to fail, with the data already in.
func failingRestoreTools(t *testing.T, s *pgtest.Server) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(s.Bin("psql"), filepath.Join(dir, "psql")))
	script := fmt.Sprintf("#!/bin/sh\n%s \"$@\"\necho 'pg_restore: error: injected failure' >&2\nexit 1\n", s.Bin("pg_restore"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755))
	return dir
}

// A restore by swap that fails, after pg_restore filled the new database or because the
// target is still in use at the swap, leaves the target as it was and drops the new database.
func TestRestoreBySwapFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t, "swapfail")
	db := f.target.conn.Database

	t.Run("pg_restore fails", func(t *testing.T) {
		sc := &fakeScaler{}
		target := localTarget(f.s, db, failingRestoreTools(t, f.s))
		_, err := Restore(ctx, target, f.m.Dir, WithToolsDir(f.s.BinDir), WithJobs(2), WithScaler(sc))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "injected failure")
		assert.Contains(t, err.Error(), db+" is unchanged")
		assert.Equal(t, sc.downs, sc.ups, "writers scaled back")
		got, err := pgtest.Checksums(ctx, f.s, db)
		require.NoError(t, err)
		assert.Equal(t, f.before, got)
		assert.Empty(t, sideDatabases(t, f.s, db))
	})

	t.Run("a session stays on the database", func(t *testing.T) {
		orig := swapSessionWait
		swapSessionWait = 2 * time.Second
		t.Cleanup(func() { swapSessionWait = orig })
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		session := exec.CommandContext(sctx, f.s.Bin("psql"), "-X", "-c", "SELECT pg_sleep(600)")
		session.Env = append(append(os.Environ(), f.s.Env(db)...), "PGAPPNAME=stray-client")
		require.NoError(t, session.Start())
		defer func() { stop(); _ = session.Wait() }()
		require.Eventually(t, func() bool {
			n, _ := f.s.Psql(ctx, "postgres", fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stray-client' AND datname = '%s'`, db))
			return n == "1"
		}, 10*time.Second, 50*time.Millisecond)

		// The stray client is not among the writers scaled down.
		_, err := Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithJobs(2), WithScaler(&fakeScaler{}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "still has 1 sessions")
		assert.Contains(t, err.Error(), "stray-client")
		assert.Contains(t, err.Error(), db+" is unchanged")
		got, err := pgtest.Checksums(ctx, f.s, db)
		require.NoError(t, err)
		assert.Equal(t, f.before, got)
		assert.Empty(t, sideDatabases(t, f.s, db))

		// With nothing scaled down (--no-scale) the swap is not tried: the one transaction
		// restores beside the client.
		var log bytes.Buffer
		_, err = Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithJobs(2), WithLogger(testLogger(&log)))
		require.NoError(t, err)
		assert.Contains(t, log.String(), "restoring in one transaction")
		assert.Contains(t, log.String(), "the database is in use (stray-client")
		got, err = pgtest.Checksums(ctx, f.s, db)
		require.NoError(t, err)
		assert.Equal(t, f.want, got)
	})
}

// Where a new database could not stand in for the target (the role may not create databases,
// or the database carries settings of its own), the restore runs in one transaction, in place,
// and says why; the database keeps what a swap would have lost.
func TestRestoreInOneTransactionWhenSwapCannot(t *testing.T) {
	ctx := context.Background()
	s, want := sharedServer(t)
	m, err := Create(ctx, localTarget(s, s.Database, s.BinDir), WithOutputDir(t.TempDir()))
	require.NoError(t, err)

	for _, c := range []struct {
		name, setup, why string
		target           func(db string) *LocalTarget
	}{
		{name: "one job", why: "one pg_restore job asked for"},
		{
			name:  "settings of its own",
			setup: `ALTER DATABASE %s SET work_mem = '7MB'`,
			why:   "settings of its own",
		},
		{
			name:  "no CREATEDB",
			setup: `DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'restorer') THEN CREATE ROLE restorer LOGIN PASSWORD 'restorer-pw' NOCREATEDB; END IF; END$$; ALTER DATABASE %s OWNER TO restorer`,
			why:   "the role restorer may not create databases",
			target: func(db string) *LocalTarget {
				return NewLocalTarget(Conn{Host: s.Host, Port: s.Port, User: "restorer", Database: db, Password: "restorer-pw"}, WithLocalBinDir(s.BinDir))
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := "inplace_" + strings.ToLower(strings.ReplaceAll(c.name, " ", "_"))
			require.NoError(t, s.CreateDatabase(ctx, db))
			if c.setup != "" {
				_, err := s.Psql(ctx, "postgres", fmt.Sprintf(c.setup, db))
				require.NoError(t, err)
			}
			target := localTarget(s, db, s.BinDir)
			if c.target != nil {
				target = c.target(db)
			}
			jobs := 2
			if c.name == "one job" {
				jobs = 1
			}
			var log bytes.Buffer
			rep, err := Restore(ctx, target, m.Dir, WithToolsDir(s.BinDir), WithJobs(jobs), WithLogger(testLogger(&log)))
			require.NoError(t, err)
			assert.Equal(t, RestoredInOneTransaction, rep.Way)
			assert.Contains(t, log.String(), "restoring in one transaction")
			assert.Contains(t, log.String(), c.why)
			assert.NotContains(t, log.String(), "restoring into a new database")
			got, err := pgtest.Checksums(ctx, s, db)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	settings, err := s.Psql(ctx, "postgres", `SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = 'inplace_settings_of_its_own'`)
	require.NoError(t, err)
	assert.Equal(t, "work_mem=7MB", settings, "the database's own setting survived the restore")
}
