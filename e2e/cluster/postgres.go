package cluster

import (
	"strconv"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/pgtest"
)

// The chart's Postgres pod and container for release "polyaxon" (chart contract).
const (
	PostgresPod       = "polyaxon-postgresql-0"
	PostgresContainer = "postgresql"
)

// PostgresExec wires `kubectl exec` into the chart's Postgres pod of namespace to the
// PostgreSQL client programs on this machine, connected to database db of pg: the simulated
// pod then answers pg_dump, pg_restore and psql as the real container would. The environment
// is the one the chart gives the postgresql container (POSTGRES_USER, POSTGRES_PASSWORD,
// POSTGRES_DB), plus PGHOST/PGPORT pointing at pg, so the installer's real exec path runs
// unchanged (local provider only: on kind exec reaches the real container).
func PostgresExec(namespace string, pg *pgtest.Server, db string) ClusterExec {
	return ClusterExec{
		Name:       "postgres-" + namespace,
		Namespaces: []string{namespace},
		Pods:       []string{PostgresPod},
		Containers: []string{PostgresContainer},
		Env: map[string]string{
			"PGHOST":            pg.Host,
			"PGPORT":            strconv.Itoa(pg.Port),
			"POSTGRES_USER":     pg.User,
			"POSTGRES_PASSWORD": pg.Password(),
			"POSTGRES_DB":       db,
			"PATH":              pg.BinDir + ":/usr/local/bin:/usr/bin:/bin",
		},
	}
}
