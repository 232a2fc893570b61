package local

import (
	"strconv"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// The chart's Postgres pod and container for release "polyaxon" (chart contract), and the
// container of its migration Job (installer/migrate.ContainerName).
const (
	PostgresPod        = "polyaxon-postgresql-0"
	PostgresContainer  = "postgresql"
	MigrationContainer = "migrate"
)

// PostgresTarget is the real PostgreSQL that answers the PostgreSQL client programs run for a
// simulated pod: a database of one server, or, with ServiceFile, whatever server a libpq
// service file names at the moment the program connects (a test rewrites the file to move the
// pods to another server, as a new volume would).
type PostgresTarget struct {
	User, Password, Database string
	// BinDir holds psql, pg_dump and pg_restore.
	BinDir string
	// Host and Port of the server; unused with ServiceFile.
	Host string
	Port int
	// ServiceFile is a pg_service.conf whose service "polyaxon" gives host and port.
	ServiceFile string
}

// TargetOf is database db of pg.
func TargetOf(pg *pgtest.Server, db string) PostgresTarget {
	return PostgresTarget{User: pg.User, Password: pg.Password(), Database: db, BinDir: pg.BinDir, Host: pg.Host, Port: pg.Port}
}

// PostgresService is the service a ServiceFile must define.
const PostgresService = "polyaxon"

// env is the environment the chart gives the postgresql container (POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB), plus libpq's own variables so that a plain `psql` connects.
func (t PostgresTarget) env() map[string]string {
	env := map[string]string{
		"POSTGRES_USER":     t.User,
		"POSTGRES_PASSWORD": t.Password,
		"POSTGRES_DB":       t.Database,
		"PGUSER":            t.User,
		"PGPASSWORD":        t.Password,
		"PGDATABASE":        t.Database,
		"PATH":              t.BinDir + ":/usr/local/bin:/usr/bin:/bin",
	}
	if t.ServiceFile != "" {
		// The service file's host and port; explicit -U/-d still name the user and database.
		env["PGSERVICEFILE"], env["PGSERVICE"] = t.ServiceFile, PostgresService
	} else {
		env["PGHOST"], env["PGPORT"] = t.Host, strconv.Itoa(t.Port)
	}
	return env
}

// PostgresExec wires `kubectl exec` into the chart's Postgres pod of namespace to the
// PostgreSQL client programs on this machine, connected to database db of pg: the simulated
// pod then answers pg_dump, pg_restore and psql as the real container would, so the
// installer's real exec path runs unchanged (local provider only: on kind exec reaches the
// real container).
func PostgresExec(namespace string, pg *pgtest.Server, db string) ClusterExec {
	return PostgresTargetExec(namespace, TargetOf(pg, db))
}

// PostgresTargetExec is PostgresExec for any PostgresTarget.
func PostgresTargetExec(namespace string, t PostgresTarget) ClusterExec {
	return ClusterExec{
		Name:       "postgres-" + namespace,
		Namespaces: []string{namespace},
		Pods:       []string{PostgresPod},
		Containers: []string{PostgresContainer},
		Env:        t.env(),
	}
}

// PostgresPodExec is PostgresTargetExec for a Postgres pod of another name (a release
// installed with fullnameOverride: <fullname>-postgresql-0).
func PostgresPodExec(namespace, pod string, t PostgresTarget) ClusterExec {
	e := PostgresTargetExec(namespace, t)
	e.Pods = []string{pod}
	return e
}

// MigrationExec wires exec into the migration container of every pod of namespace (the
// migration Job's pods have generated names) to the same client programs and database: a
// migration pod annotated RunAnnotation (WithPodCommands) then really writes to it.
func MigrationExec(namespace string, t PostgresTarget) ClusterExec {
	return ClusterExec{
		Name:       "migrate-" + namespace,
		Namespaces: []string{namespace},
		Containers: []string{MigrationContainer},
		Env:        t.env(),
	}
}
