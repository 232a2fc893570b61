package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Migrations that really write. The chart's migration pod runs Polyaxon's `migrate`, which no
// local cluster can run; a migration pod given a script (local.RunAnnotation, through
// migrations.podAnnotations) runs it instead, with psql against the namespace's database,
// through exec as backups do (local.MigrationExec), and ends by its exit code.

// migrationsSchema holds what the scenarios' migrations record; it is outside the public
// schema, so the seeded tables' checksums (pgtest.Checksums) do not see it.
const migrationsSchema = "polyaxon_migrations"

// recordMigration is a well-behaved migration: it records that version was applied.
func recordMigration(version string) string {
	return fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE IF NOT EXISTS %[1]s.applied (version text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
INSERT INTO %[1]s.applied (version) VALUES ('%[2]s') ON CONFLICT DO NOTHING;`, migrationsSchema, version)
}

// destructiveFailingMigration alters a table and deletes rows (each statement commits), then
// fails: what a broken migration leaves behind.
const destructiveFailingMigration = `ALTER TABLE runs ADD COLUMN migrated boolean NOT NULL DEFAULT true;
DELETE FROM metrics;
SELECT polyaxon_deploy_no_such_function();`

// migrationValues writes a values file that makes the migration pod run sql (psql, stopping at
// the first error: exit 3) and returns its path.
func migrationValues(t *testing.T, sql string) string {
	t.Helper()
	script := "psql -v ON_ERROR_STOP=1 -q <<'SQL'\n" + sql + "\nSQL\n"
	b, err := yaml.Marshal(map[string]any{"migrations": map[string]any{"podAnnotations": map[string]any{local.RunAnnotation: script}}})
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "migration.yaml")
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// appliedMigrations lists the versions recordMigration wrote to database db of pg (none when
// no migration ever ran there).
func appliedMigrations(t *testing.T, pg *pgtest.Server, db string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exists, err := pg.Psql(ctx, db, fmt.Sprintf("SELECT count(*) FROM pg_namespace WHERE nspname = '%s'", migrationsSchema))
	require.NoError(t, err)
	if exists == "0" {
		return nil
	}
	out, err := pg.Psql(ctx, db, "SELECT version FROM "+migrationsSchema+".applied ORDER BY version")
	require.NoError(t, err)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}
