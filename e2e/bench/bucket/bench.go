package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// where the bucket's backups go, as --dir s3://... names it.
const where = "s3://bench/backups"

// release is the release the backups say they are of, and the restores say they go to (as the
// CLI's do), so that the origin check runs on both sides.
var release = backup.ReleaseInfo{Name: "bench", Namespace: "bench"}

// result is the whole bench: the database, the store, and each run.
type result struct {
	size, dbSize int64
	rows, tables int
	runs         []runResult
	identical    bool
}

// runResult is one run of the four operations, in seconds, and what the bucket side moved.
type runResult struct {
	load        string // the load averages as the run began
	first       string // the side that went first in this run
	dirBackup   float64
	bktBackup   float64 // staging + upload
	dirRestore  float64
	bktRestore  float64 // download + restore
	check       float64 // the bucket checked writable (before anything is dumped)
	staged      float64 // the backup written and verified into the staging directory
	upload      float64 // the upload alone
	download    float64 // the download alone
	dumpSize    int64   // the bucket backup's dump (manifest's DumpSize)
	files       int64   // the bucket backup's files, manifest included: what is uploaded and downloaded
	storeUse    int64   // the store's data directory on disk, with this run's backup in it
	storeLeft   int64   // the same once the backup is removed from the bucket
	dirDumpSize int64   // the directory backup's dump
}

// bench seeds a database of about size bytes, starts a store, and runs the sides runs times.
func bench(ctx context.Context, size int64, runs int, workdir, maxWAL string) (*result, error) {
	res := &result{size: size, identical: true}
	fmt.Printf("== backups in a bucket against backups in a directory, database of about %s, %d run(s), %d cores, max_wal_size %s ==\n",
		output.HumanBytes(size), runs, runtime.NumCPU(), maxWAL)
	srv, err := pgtest.Start(ctx, pgtest.WithSetting("max_wal_size", maxWAL), pgtest.WithSetting("checkpoint_timeout", "30min"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	st, err := s3test.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	loc, err := bucket.ParseLocation(where)
	if err != nil {
		return nil, err
	}
	if err := st.CreateBucket(ctx, loc.Bucket, ""); err != nil {
		return nil, err
	}
	store, err := bucket.Open(ctx, bucket.WithEndpoint(st.Endpoint), bucket.WithStaticCredentials(st.RootAccessKey, st.RootSecretKey), bucket.WithRegion(st.Region))
	if err != nil {
		return nil, err
	}

	t0 := time.Now()
	seeded, err := pgtest.SeedTo(ctx, srv, srv.Database, size)
	if err != nil {
		return nil, err
	}
	if res.dbSize, err = pgtest.DatabaseSize(ctx, srv, srv.Database); err != nil {
		return nil, err
	}
	res.rows = pgtest.RowsFor(seeded)
	want, err := pgtest.Checksums(ctx, srv, srv.Database)
	if err != nil {
		return nil, err
	}
	res.tables = len(want)
	fmt.Printf("seeded %s (%d rows) in %s; PostgreSQL in %s; versitygw at %s, its data in %s; scratch in %s (free %s)\n",
		output.HumanBytes(res.dbSize), res.rows, time.Since(t0).Round(time.Second), srv.BinDir, st.Endpoint, st.DataDir, workdir, output.HumanBytes(freeDisk(workdir)))

	target := func(db string) backup.Target {
		return backup.NewLocalTarget(backup.Conn{Host: srv.Host, Port: srv.Port, User: srv.User, Database: db, Password: srv.Password()},
			backup.WithLocalBinDir(srv.BinDir))
	}
	src := target(srv.Database)
	tools := backup.WithToolsDir(srv.BinDir)
	// create is a backup as the CLI takes it: written, then verified.
	create := func(outDir string) (*backup.Manifest, error) {
		m, err := backup.Create(ctx, src, backup.WithOutputDir(outDir), backup.WithRelease(release))
		if err != nil {
			return nil, err
		}
		_, err = backup.Verify(ctx, m.Dir, tools, backup.WithVerifyTarget(src))
		return m, err
	}
	restoreOpts := []backup.RestoreOption{tools, backup.WithTargetRelease(release.Name, release.Namespace)}
	// restoreInto times restore into a new database, from a checkpoint so that neither side
	// pays for the other's dirty buffers; the copy is then compared with the seed and dropped.
	restoreInto := func(db string, restore func(db string) error) (float64, error) {
		if err := srv.CreateDatabase(ctx, db); err != nil {
			return 0, err
		}
		if _, err := srv.Psql(ctx, "postgres", "CHECKPOINT"); err != nil {
			return 0, err
		}
		t := time.Now()
		if err := restore(db); err != nil {
			return 0, err
		}
		secs := time.Since(t).Seconds()
		got, err := pgtest.Checksums(ctx, srv, db)
		if err != nil {
			return 0, err
		}
		if !maps.Equal(want, got) {
			res.identical = false
			fmt.Printf("  CONTENTS DIFFER in %s: want %v got %v\n", db, want, got)
		}
		_, err = srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", db))
		return secs, err
	}

	for i := range runs {
		r := runResult{load: loadAvg()}
		var dirM *backup.Manifest
		var uploaded bucket.Location
		backups := []side{
			{"directory", func() (err error) {
				t := time.Now()
				if dirM, err = create(filepath.Join(workdir, "directory")); err != nil {
					return err
				}
				r.dirBackup, r.dirDumpSize = time.Since(t).Seconds(), dirM.DumpSize
				return nil
			}},
			{"bucket", func() error {
				t := time.Now()
				if err := store.CheckWritable(ctx, loc); err != nil {
					return err
				}
				staging, err := os.MkdirTemp(workdir, "staging-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(staging)
				r.check = time.Since(t).Seconds()
				ts := time.Now()
				m, err := create(staging)
				if err != nil {
					return err
				}
				r.staged = time.Since(ts).Seconds()
				r.dumpSize, r.files = m.DumpSize, dirSize(m.Dir)
				uploaded = loc.Join(filepath.Base(m.Dir))
				tu := time.Now()
				if err := store.Upload(ctx, m.Dir, uploaded); err != nil {
					return err
				}
				r.upload = time.Since(tu).Seconds()
				if err := os.RemoveAll(staging); err != nil {
					return err
				}
				r.bktBackup = time.Since(t).Seconds()
				return nil
			}},
		}
		if err := inTurn(i, backups, &r.first); err != nil {
			return nil, fmt.Errorf("run %d: backup: %w", i+1, err)
		}
		r.storeUse = diskUse(st.DataDir)

		restores := []side{
			{"directory", func() (err error) {
				r.dirRestore, err = restoreInto(fmt.Sprintf("r_directory_%d", i), func(db string) error {
					_, err := backup.Restore(ctx, target(db), dirM.Dir, restoreOpts...)
					return err
				})
				return err
			}},
			{"bucket", func() (err error) {
				r.bktRestore, err = restoreInto(fmt.Sprintf("r_bucket_%d", i), func(db string) error {
					l, err := store.Resolve(ctx, uploaded)
					if err != nil {
						return err
					}
					tmp, err := os.MkdirTemp(workdir, "fetched-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(tmp)
					_, name := l.Split()
					dir := filepath.Join(tmp, name)
					td := time.Now()
					if _, err := store.Download(ctx, l, dir); err != nil {
						return err
					}
					r.download = time.Since(td).Seconds()
					if _, err := backup.Restore(ctx, target(db), dir, restoreOpts...); err != nil {
						return err
					}
					return os.RemoveAll(tmp)
				})
				return err
			}},
		}
		var restoreFirst string
		if err := inTurn(i, restores, &restoreFirst); err != nil {
			return nil, fmt.Errorf("run %d: restore: %w", i+1, err)
		}

		// Room for the next run: this run's backups go, in the directory and in the bucket.
		if err := os.RemoveAll(dirM.Dir); err != nil {
			return nil, err
		}
		if err := store.Remove(ctx, uploaded); err != nil {
			return nil, err
		}
		r.storeLeft = diskUse(st.DataDir)
		res.runs = append(res.runs, r)
		r.print(i)
	}
	return res, nil
}

// side is one side of an operation, run for its effects (it records its own times).
type side struct {
	name string
	run  func() error
}

// inTurn runs both sides, the first going second in the next run, so that drift (caches,
// other load) hits both alike; first is set to the side that went first.
func inTurn(run int, sides []side, first *string) error {
	if run%2 == 1 {
		sides = []side{sides[1], sides[0]}
	}
	*first = sides[0].name
	for _, s := range sides {
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
