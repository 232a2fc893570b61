// Command bucket benchmarks backups kept in an S3 bucket against backups kept in a directory,
// side by side in the same run (issue 56: backup and restore times against the directory
// target at 1 GiB).
//
//	go run ./e2e/bench/bucket [-size 1GiB] [-runs 3]
//
// On a real PostgreSQL (e2e/pgtest) seeded to -size and a real S3 store on loopback
// (e2e/s3test, versitygw), each run measures, the order of the two sides alternating from one
// run to the next:
//   - backup to a directory (the baseline): backup.Create, then backup.Verify, as
//     `polyaxon-deploy backup --dir DIR` does;
//   - backup to the bucket, as `backup --dir s3://... --no-encrypt` does: the bucket checked
//     writable, the same Create and Verify into a staging directory, the upload, the staging
//     directory removed;
//   - restore from the directory (the baseline): backup.Restore into a new database;
//   - restore from the bucket, as `restore s3://...` does: the backup downloaded into a
//     private directory, restored from there into a new database, the directory removed.
//
// Each restored database is compared with the seeded one (pgtest.Checksums). Prints each run,
// the medians, the upload and download alone (MiB/s), the dump's size, the store's disk use,
// and the ratios bucket/directory (median and worst run) with the load average. Exits 1 when a
// restored database differs. No ratio is a pass or a fail: the bench reports, it asserts
// nothing about time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() { os.Exit(run()) }

func run() int {
	sizeFlag := flag.String("size", envOr("BENCH_BUCKET_SIZE", "1GiB"), "database size: 250MiB, 1GiB (env BENCH_BUCKET_SIZE)")
	runs := flag.Int("runs", envInt("BENCH_BUCKET_RUNS", 3), "runs of each measurement (env BENCH_BUCKET_RUNS)")
	workdir := flag.String("workdir", os.Getenv("BENCH_BUCKET_WORKDIR"), "scratch directory for the backups, the staging and the downloads (default: a temp dir)")
	maxWAL := flag.String("max-wal-size", "4GB", "the server's max_wal_size: the WAL's share of the disk a bench needs")
	flag.Parse()
	size, err := parseSize(*sizeFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-bucket: -size:", err)
		return 2
	}
	if *workdir == "" {
		d, err := os.MkdirTemp("", "bench-bucket-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-bucket:", err)
			return 1
		}
		defer os.RemoveAll(d)
		*workdir = d
	}
	res, err := bench(context.Background(), size, max(*runs, 1), *workdir, *maxWAL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-bucket:", err)
		return 1
	}
	res.print()
	if !res.identical {
		fmt.Println("FAIL: a restored database differs from the seeded one")
		return 1
	}
	return 0
}

// parseSize reads 250MiB, 1GiB (or Mi, Gi, MB, GB, a plain number of bytes).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"GB", 1e9}, {"MB", 1e6}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, errors.New("bad size " + strconv.Quote(s) + " (use e.g. 250MiB or 1GiB)")
	}
	return int64(f * mult), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}
