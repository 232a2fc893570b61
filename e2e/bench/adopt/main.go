// Command adopt benchmarks what adopting a release costs in database time, against the plain
// backup and restore of the same database in the same run.
//
//	go run ./e2e/bench/adopt [-size 1Gi] [-runs 1]
//
// On a real PostgreSQL seeded to -size, each run measures, interleaved:
//   - plain backup: `polyaxon-deploy backup` (dump through our chart's Postgres container,
//     then verify), and plain restore: `polyaxon-deploy restore` into an empty database;
//   - adopt's backup phase (adopt.Dump through the Bitnami container's environment) and its
//     restore phase (adopt.Load: restore into ours, then every table's rows compared).
//
// Both sides reach the database the same way: the command `kubectl exec` would run in the
// container runs on this machine with that container's environment (adopttest.LocalExecer),
// so the API server's streaming is left out of both. Prints medians, both sums and the ratio
// adopt/plain; exits 1 when a restored database differs from the seeded one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt/adopttest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

const source = "official"

func main() { os.Exit(run()) }

func run() int {
	size := flag.String("size", envOr("BENCH_ADOPT_SIZE", "1Gi"), "database size (a Kubernetes quantity: 250Mi, 1Gi; env BENCH_ADOPT_SIZE)")
	runs := flag.Int("runs", envInt("BENCH_ADOPT_RUNS", 1), "runs of each measurement (env BENCH_ADOPT_RUNS)")
	workdir := flag.String("workdir", os.Getenv("BENCH_ADOPT_WORKDIR"), "scratch directory for dumps (default: a temp dir)")
	flag.Parse()
	q, err := resource.ParseQuantity(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-adopt: -size:", err)
		return 2
	}
	if *workdir == "" {
		d, err := os.MkdirTemp("", "bench-adopt-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-adopt:", err)
			return 1
		}
		defer os.RemoveAll(d)
		*workdir = d
	}
	if err := bench(context.Background(), q.Value(), max(*runs, 1), *workdir); err != nil {
		fmt.Fprintln(os.Stderr, "bench-adopt:", err)
		return 1
	}
	return 0
}

// side is one way of moving the database: its backup and restore times.
type side struct{ backup, restore []float64 }

func bench(ctx context.Context, size int64, runs int, workdir string) error {
	srv, err := pgtest.Start(ctx, pgtest.WithSetting("max_wal_size", "4GB"), pgtest.WithSetting("checkpoint_timeout", "30min"))
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.CreateDatabase(ctx, source); err != nil {
		return err
	}
	t0 := time.Now()
	seeded, err := pgtest.SeedTo(ctx, srv, source, size)
	if err != nil {
		return err
	}
	dbSize, err := pgtest.DatabaseSize(ctx, srv, source)
	if err != nil {
		return err
	}
	want, err := pgtest.Checksums(ctx, srv, source)
	if err != nil {
		return err
	}
	fmt.Printf("database: %s asked, %s seeded (%d rows) in %s; PostgreSQL in %s; %d run(s)\n",
		output.HumanBytes(size), output.HumanBytes(dbSize), pgtest.RowsFor(seeded), time.Since(t0).Round(time.Second), srv.BinDir, runs)

	port := strconv.Itoa(srv.Port)
	path := srv.BinDir + ":/usr/bin:/bin"
	// Our chart's Postgres container (what `backup` and `restore` reach), on database db.
	ours := func(db string) backup.Target {
		env := map[string]string{"POSTGRES_USER": srv.User, "POSTGRES_PASSWORD": srv.Password(), "POSTGRES_DB": db,
			"PGHOST": srv.Host, "PGPORT": port, "PATH": path}
		return backup.NewPodTarget(adopttest.LocalExecer{Env: env}, "bench", "polyaxon-postgresql-0", "postgresql", backup.SourceInCluster)
	}
	// The official chart's Bitnami container.
	bitnami := &adopt.BitnamiTarget{Execer: adopttest.LocalExecer{Env: map[string]string{
		"POSTGRES_USER": srv.User, "POSTGRES_PASSWORD": srv.Password(), "POSTGRES_DATABASE": source,
		"POSTGRESQL_PORT_NUMBER": port, "PATH": path}}, Namespace: "bench", Pod: "plx-postgresql-0", Container: "postgresql"}
	tools := backup.WithToolsDir(srv.BinDir)

	var plain, adopted side
	for i := 0; i < runs; i++ {
		dir := filepath.Join(workdir, strconv.Itoa(i))
		var pm, am *backup.Manifest
		dumps := []func() error{
			func() (err error) {
				var secs float64
				secs, pm, err = timed(func() (*backup.Manifest, error) {
					m, err := backup.Create(ctx, ours(source), backup.WithOutputDir(filepath.Join(dir, "plain")))
					if err != nil {
						return nil, err
					}
					_, err = backup.Verify(ctx, m.Dir, tools, backup.WithVerifyTarget(ours(source)))
					return m, err
				})
				plain.backup = append(plain.backup, secs)
				return err
			},
			func() (err error) {
				var secs float64
				secs, am, err = timed(func() (*backup.Manifest, error) {
					return adopt.Dump(ctx, bitnami, []backup.CreateOption{backup.WithOutputDir(filepath.Join(dir, "adopt"))}, tools)
				})
				adopted.backup = append(adopted.backup, secs)
				return err
			},
		}
		if i%2 == 1 { // alternate who goes first: caches and load drift hit both sides alike
			dumps[0], dumps[1] = dumps[1], dumps[0]
		}
		for _, d := range dumps {
			if err := d(); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
		}

		restores := []struct {
			name string
			dir  string
			to   *side
			load func(db, dir string) error
		}{
			{"plain", pm.Dir, &plain, func(db, dir string) error {
				_, err := backup.Restore(ctx, ours(db), dir, tools)
				return err
			}},
			{"adopt", am.Dir, &adopted, func(db, dir string) error {
				_, err := adopt.Load(ctx, ours(db), dir, tools)
				return err
			}},
		}
		if i%2 == 1 {
			restores[0], restores[1] = restores[1], restores[0]
		}
		for _, r := range restores {
			db := fmt.Sprintf("r_%s_%d", r.name, i)
			if err := srv.CreateDatabase(ctx, db); err != nil {
				return err
			}
			secs, _, err := timed(func() (*backup.Manifest, error) { return nil, r.load(db, r.dir) })
			if err != nil {
				return fmt.Errorf("%s restore: %w", r.name, err)
			}
			r.to.restore = append(r.to.restore, secs)
			got, err := pgtest.Checksums(ctx, srv, db)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(want, got) {
				return fmt.Errorf("%s restore: the restored database differs from the seeded one", r.name)
			}
			if _, err := srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", db)); err != nil {
				return err
			}
		}
		fmt.Printf("  run %d: backup plain %.2fs adopt %.2fs; restore plain %.2fs adopt %.2fs (both restores identical to the seed)\n",
			i+1, plain.backup[i], adopted.backup[i], plain.restore[i], adopted.restore[i])
		_ = os.RemoveAll(dir)
	}

	pb, pr, ab, ar := median(plain.backup), median(plain.restore), median(adopted.backup), median(adopted.restore)
	fmt.Println()
	fmt.Printf("%-32s %9s %9s %9s\n", "median seconds", "backup", "restore", "sum")
	fmt.Printf("%-32s %9.2f %9.2f %9.2f\n", "plain backup + restore", pb, pr, pb+pr)
	fmt.Printf("%-32s %9.2f %9.2f %9.2f\n", "adopt: backup + restore phases", ab, ar, ab+ar)
	fmt.Printf("%-32s %9.2f %9.2f %9.2f\n", "ratio adopt / plain", ab/pb, ar/pr, (ab+ar)/(pb+pr))
	fmt.Println("(exec is local on both sides: the API server's streaming is not measured; restores checked against the seed)")
	return nil
}

func timed(f func() (*backup.Manifest, error)) (float64, *backup.Manifest, error) {
	t := time.Now()
	m, err := f()
	return time.Since(t).Seconds(), m, err
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}
