package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// demoRuns sizes the demo's sample data: 200 runs with their statuses, artifacts and metrics,
// under 50 owners and 200 projects (2250 rows), enough to see a backup and a restore
// carry real rows in seconds.
const demoRuns = 200

// The chart's database and user (postgresql.auth.database, .username): Polyaxon's API connects
// as them, with the password the install is given (the server's, from PasswordFile).
const (
	chartDatabase = "polyaxon"
	chartUser     = "polyaxon"
)

// startDatabase starts the PostgreSQL server that answers for the demo's Postgres pod, with
// the chart's database and user, and fills the database with Polyaxon-like sample data.
// Polyaxon's API migrates its own tables into the same database when it starts: theirs are
// haupt's db_* and Django's auth_* and django_*, none of which the sample's names collide with
// (e2e TestREADMEDemoCommands checks both after the demo). The caller detaches it (it
// outlives this process) or closes it on failure.
func startDatabase(ctx context.Context) (*pgtest.Server, error) {
	start := time.Now()
	pg, err := pgtest.Start(ctx, pgtest.WithFastUnsafe(), pgtest.WithUser(chartUser), pgtest.WithDatabase(chartDatabase))
	if err != nil {
		return nil, fmt.Errorf("the demo's database: %w", err)
	}
	if err := pgtest.Seed(ctx, pg, pg.Database, pgtest.SeedSpec{Runs: demoRuns}); err != nil {
		_ = pg.Close()
		return nil, fmt.Errorf("the demo's database: %w", err)
	}
	sums, err := pgtest.Checksums(ctx, pg, pg.Database)
	if err != nil {
		_ = pg.Close()
		return nil, fmt.Errorf("the demo's database: %w", err)
	}
	rows := 0
	for _, s := range sums {
		n, _, _ := strings.Cut(s, ":")
		c, _ := strconv.Atoi(n)
		rows += c
	}
	fmt.Fprintf(os.Stderr, "PostgreSQL %s:%d (data in %s) seeded with %d runs (%d rows over %d tables) in %s\n",
		pg.Host, pg.Port, pg.DataDir, demoRuns, rows, len(sums), time.Since(start).Round(100*time.Millisecond))
	return pg, nil
}
