package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/pgtest"
)

// demoRuns sizes the demo's sample data: 200 runs with their statuses, artifacts and metrics,
// under 50 owners and 200 projects (about 2,300 rows), enough to see a backup and a restore
// carry real rows in seconds.
const demoRuns = 200

// startDatabase starts the PostgreSQL server that answers for the demo's Postgres pod and
// fills its database with Polyaxon-like sample data. The caller detaches it (it outlives
// this process) or closes it on failure.
func startDatabase(ctx context.Context) (*pgtest.Server, error) {
	start := time.Now()
	pg, err := pgtest.Start(ctx, pgtest.WithFastUnsafe())
	if err != nil {
		return nil, fmt.Errorf("the demo's database: %w", err)
	}
	if err := pgtest.Seed(ctx, pg, pg.Database, pgtest.SeedSpec{Runs: demoRuns}); err != nil {
		_ = pg.Close()
		return nil, fmt.Errorf("the demo's database: %w", err)
	}
	fmt.Fprintf(os.Stderr, "PostgreSQL %s:%d (data in %s) seeded with %d runs (%d rows over %d tables) in %s\n",
		pg.Host, pg.Port, pg.DataDir, demoRuns, pgtest.RowsFor(demoRuns), len(pgtest.Tables), time.Since(start).Round(100*time.Millisecond))
	return pg, nil
}
