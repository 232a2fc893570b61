// Command backup benchmarks polyaxon-deploy's database backup and restore
// against plain pg_dump --format=custom (default compression) and plain
// pg_restore, on a real PostgreSQL seeded with a realistic schema.
//
//	go run ./e2e/bench/backup [-sizes 250MiB,1GiB] [-runs 3]
//
// Our side runs in a child process (this binary re-executed) through the
// same library calls as `polyaxon-deploy backup --local` / `restore --local`
// (backup.Create, backup.Verify, backup.Restore with a LocalTarget), so its
// peak RSS is measured alone. Prints medians and "ratio" lines; exits 1 when
// the restored contents differ or -enforce is given and a ratio is above its
// target.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// Targets (issue 43): our backup takes at most 35% of plain pg_dump's time, our restore (its
// checks included) at most 80% of plain pg_restore's.
const (
	targetRatio        = 0.35
	targetRestoreRatio = 0.80
)

const childEnv = "BENCH_BACKUP_CHILD" // set in the re-executed child
const passwordEnv = "BENCH_BACKUP_PGPASSWORD"

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(parent())
}

type options struct {
	sizes    []int64
	runs     int
	workdir  string
	codec    string
	level    int
	jobs     int
	dumpJobs int
	enforce  bool
	jsonOut  string
	maxWAL   string
	// restoreLog: the file our restores append their log to ("": none).
	restoreLog string
}

func parent() int {
	var o options
	sizes := flag.String("sizes", envOr("BENCH_BACKUP_SIZES", "250MiB,1GiB"), "database sizes to benchmark, comma separated (env BENCH_BACKUP_SIZES)")
	flag.IntVar(&o.runs, "runs", envInt("BENCH_BACKUP_RUNS", 3), "runs of each measurement (env BENCH_BACKUP_RUNS)")
	flag.StringVar(&o.workdir, "workdir", os.Getenv("BENCH_BACKUP_WORKDIR"), "scratch directory for dumps (default: a temp dir)")
	flag.StringVar(&o.codec, "codec", backup.DefaultCodec, "our codec: s2, zstd or none")
	flag.IntVar(&o.level, "level", backup.DefaultLevel, "our codec's level")
	flag.IntVar(&o.jobs, "jobs", 0, "our restore's pg_restore jobs (0: its default; 1: the one-transaction restore)")
	flag.IntVar(&o.dumpJobs, "dump-jobs", 0, "our backup's parallel streams (0: its default; 1: one archive)")
	flag.BoolVar(&o.enforce, "enforce", os.Getenv("BENCH_BACKUP_ENFORCE") != "", "exit 1 when the backup or restore ratio is above its target (env BENCH_BACKUP_ENFORCE)")
	flag.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&o.restoreLog, "restore-log", "", "append our restores' log to this file: when each stream's data is in, its indexes built, each pass of foreign keys")
	flag.StringVar(&o.maxWAL, "max-wal-size", "4GB", "the server's max_wal_size: the WAL's share of the disk a bench needs")
	flag.Parse()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := parseSize(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-backup:", err)
			return 2
		}
		o.sizes = append(o.sizes, n)
	}
	if o.runs < 1 {
		o.runs = 1
	}
	if o.workdir == "" {
		d, err := os.MkdirTemp("", "bench-backup-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-backup:", err)
			return 1
		}
		defer os.RemoveAll(d)
		o.workdir = d
	}
	ctx := context.Background()
	var all []*sizeResult
	failed := false
	for _, size := range o.sizes {
		r, err := benchSize(ctx, o, size)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-backup: size %s: %v\n", output.HumanBytes(size), err)
			return 1
		}
		all = append(all, r)
		if !r.Identical || (o.enforce && (r.BackupRatio > targetRatio || r.RestoreRatio > targetRestoreRatio)) {
			failed = true
		}
	}
	fmt.Println()
	fmt.Println("summary")
	for _, r := range all {
		fmt.Printf("  %-9s backup ratio %.2f (target <= %.2f)  restore ratio %.2f (target <= %.2f)  peak RSS ours: backup %s, restore %s  contents identical: %v\n",
			output.HumanBytes(r.TargetSize), r.BackupRatio, targetRatio, r.RestoreRatio, targetRestoreRatio, output.HumanBytes(r.Ours.PeakRSS), output.HumanBytes(r.OursRestore.PeakRSS), r.Identical)
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-backup:", err)
			return 1
		}
	}
	if failed {
		fmt.Println("FAIL")
		return 1
	}
	return 0
}

type measure struct {
	Seconds     []float64 `json:"seconds"`
	Median      float64   `json:"median"`
	Bytes       int64     `json:"bytes,omitempty"`
	PeakRSS     int64     `json:"peakRSS,omitempty"`     // our process, bytes
	ChildrenRSS int64     `json:"childrenRSS,omitempty"` // largest child (pg_dump, pg_restore)
	Extra       float64   `json:"verifySeconds,omitempty"`
	// CPU time of the backup alone (verify excluded): our process, and its pg_dump and psql.
	CPU     []float64 `json:"cpuSeconds,omitempty"`
	ToolCPU []float64 `json:"toolCPUSeconds,omitempty"`
}

type sizeResult struct {
	TargetSize   int64   `json:"targetSize"`
	DBSize       int64   `json:"dbSize"`
	Rows         int     `json:"rows"`
	Ours         measure `json:"oursBackup"`
	Plain        measure `json:"plainBackup"`
	OursRestore  measure `json:"oursRestore"`
	PlainRestore measure `json:"plainRestore"`
	BackupRatio  float64 `json:"backupRatio"`
	RestoreRatio float64 `json:"restoreRatio"`
	Identical    bool    `json:"identical"`
}

func benchSize(ctx context.Context, o options, size int64) (*sizeResult, error) {
	res := &sizeResult{TargetSize: size}
	fmt.Printf("== database of about %s ==\n", output.HumanBytes(size))
	srv, err := pgtest.Start(ctx,
		pgtest.WithSetting("max_wal_size", o.maxWAL),
		pgtest.WithSetting("checkpoint_timeout", "30min"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	t0 := time.Now()
	runs, err := pgtest.SeedTo(ctx, srv, srv.Database, size)
	if err != nil {
		return nil, err
	}
	if res.DBSize, err = pgtest.DatabaseSize(ctx, srv, srv.Database); err != nil {
		return nil, err
	}
	res.Rows = pgtest.RowsFor(runs)
	fmt.Printf("seeded %s (%d rows, %d runs) in %s with PostgreSQL in %s\n", output.HumanBytes(res.DBSize), res.Rows, runs, since(t0), srv.BinDir)
	want, err := pgtest.Checksums(ctx, srv, srv.Database)
	if err != nil {
		return nil, err
	}

	dir := filepath.Join(o.workdir, strconv.FormatInt(size, 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	plainFile := filepath.Join(dir, "plain.dump")
	var lastOurs string
	// Interleaved so drift (caches, other load) hits both sides alike.
	for i := 0; i < o.runs; i++ {
		_ = os.RemoveAll(filepath.Join(dir, "ours"))
		cr, err := runChild(ctx, srv, "backup", srv.Database, filepath.Join(dir, "ours"), o)
		if err != nil {
			return nil, fmt.Errorf("our backup: %w", err)
		}
		res.Ours.Seconds = append(res.Ours.Seconds, cr.Seconds)
		res.Ours.Bytes, lastOurs = cr.Bytes, cr.Dir
		res.Ours.PeakRSS = max(res.Ours.PeakRSS, cr.MaxRSS)
		res.Ours.ChildrenRSS = max(res.Ours.ChildrenRSS, cr.ChildrenRSS)
		res.Ours.Extra = cr.VerifySeconds
		res.Ours.CPU = append(res.Ours.CPU, cr.CPUSeconds)
		res.Ours.ToolCPU = append(res.Ours.ToolCPU, cr.ToolCPUSeconds)

		secs, err := timed(ctx, srv, srv.Database, srv.Bin("pg_dump"), "--format=custom", "--file="+plainFile)
		if err != nil {
			return nil, fmt.Errorf("plain pg_dump: %w", err)
		}
		res.Plain.Seconds = append(res.Plain.Seconds, secs)
		if st, err := os.Stat(plainFile); err == nil {
			res.Plain.Bytes = st.Size()
		}
		fmt.Printf("  backup run %d: ours %.2fs (%s, %s, verify %.2fs; CPU: our process %.2fs, its pg_dump and psql %.2fs)  plain pg_dump -Fc %.2fs (%s)  (ratio %.2f; load %s)\n",
			i+1, cr.Seconds, output.HumanBytes(cr.Bytes), cr.Layout, cr.VerifySeconds, cr.CPUSeconds, cr.ToolCPUSeconds, secs, output.HumanBytes(res.Plain.Bytes), cr.Seconds/secs, loadAvg())
	}
	res.Ours.Median, res.Plain.Median = median(res.Ours.Seconds), median(res.Plain.Seconds)
	res.BackupRatio = res.Ours.Median / res.Plain.Median

	// The source is not needed any more (its checksums are taken): dropped, it leaves room for
	// a restored copy, so that a bench needs the disk of two copies of the database, not three.
	if _, err := srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", srv.Database)); err != nil {
		return nil, err
	}
	fmt.Printf("  free disk for the restores: %s\n", output.HumanBytes(freeDisk(dir)))

	res.Identical = true
	for i := 0; i < o.runs; i++ {
		oursDB, plainDB := fmt.Sprintf("r_ours_%d", i), fmt.Sprintf("r_plain_%d", i)
		// Each restore starts from a checkpoint, so that neither pays for the other's dirty
		// buffers, and the two take turns going first. Each restored copy is checked (the
		// first run) and dropped before the other side restores.
		var cr *childResult
		var secs float64
		restore := func(db string, run func() error) error {
			if err := srv.CreateDatabase(ctx, db); err != nil {
				return err
			}
			if _, err := srv.Psql(ctx, "postgres", "CHECKPOINT"); err != nil {
				return err
			}
			if err := run(); err != nil {
				return err
			}
			if i == 0 {
				got, err := pgtest.Checksums(ctx, srv, db)
				if err != nil {
					return err
				}
				if !equalMaps(want, got) {
					res.Identical = false
					fmt.Printf("  CONTENTS DIFFER in %s: want %v got %v\n", db, want, got)
				}
			}
			_, err := srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", db))
			return err
		}
		ours := func() error {
			return restore(oursDB, func() error {
				r, err := runChild(ctx, srv, "restore", oursDB, lastOurs, o)
				if err != nil {
					return fmt.Errorf("our restore: %w", err)
				}
				cr = r
				return nil
			})
		}
		plain := func() error {
			return restore(plainDB, func() error {
				s, err := timed(ctx, srv, plainDB, srv.Bin("pg_restore"), "--clean", "--if-exists", "--single-transaction", "--no-owner", "--dbname="+plainDB, plainFile)
				if err != nil {
					return fmt.Errorf("plain pg_restore: %w", err)
				}
				secs = s
				return nil
			})
		}
		order := []func() error{ours, plain}
		if i%2 == 1 {
			order = []func() error{plain, ours}
		}
		for _, run := range order {
			if err := run(); err != nil {
				return nil, err
			}
		}
		res.OursRestore.Seconds = append(res.OursRestore.Seconds, cr.Seconds)
		res.OursRestore.PeakRSS = max(res.OursRestore.PeakRSS, cr.MaxRSS)
		res.OursRestore.ChildrenRSS = max(res.OursRestore.ChildrenRSS, cr.ChildrenRSS)
		res.PlainRestore.Seconds = append(res.PlainRestore.Seconds, secs)
		fmt.Printf("  restore run %d: ours %.2fs (sha256 check included)  plain pg_restore %.2fs  (ratio %.2f; load %s)\n", i+1, cr.Seconds, secs, cr.Seconds/secs, loadAvg())
		fmt.Printf("    ours, %s: %s\n", cr.Way, stepsLine(cr.Steps))
	}
	res.OursRestore.Median, res.PlainRestore.Median = median(res.OursRestore.Seconds), median(res.PlainRestore.Seconds)
	res.RestoreRatio = res.OursRestore.Median / res.PlainRestore.Median

	fmt.Printf("backup  median: ours %.2fs (%s, %s level %d; verify %.2fs)  plain %.2fs (%s)\n",
		res.Ours.Median, output.HumanBytes(res.Ours.Bytes), o.codec, o.level, res.Ours.Extra, res.Plain.Median, output.HumanBytes(res.Plain.Bytes))
	fmt.Printf("backup CPU median: our process %.2fs, its pg_dump and psql %.2fs\n", median(res.Ours.CPU), median(res.Ours.ToolCPU))
	fmt.Printf("backup ratio (ours/plain pg_dump -Fc): %.2f (target <= %.2f) %s\n", res.BackupRatio, targetRatio, passFail(res.BackupRatio <= targetRatio))
	fmt.Printf("restore median: ours %.2fs (table of contents, sha256, pg_restore, table check; jobs %s)  plain pg_restore --single-transaction %.2fs\n", res.OursRestore.Median, jobsName(o.jobs), res.PlainRestore.Median)
	fmt.Printf("restore ratio (ours/plain pg_restore): %.2f (target <= %.2f) %s\n", res.RestoreRatio, targetRestoreRatio, passFail(res.RestoreRatio <= targetRestoreRatio))
	fmt.Printf("restored contents identical (%d tables, ours and plain): %v\n", len(want), res.Identical)
	fmt.Printf("peak RSS of our process: backup %s, restore %s (largest child, upper bound: pg_dump %s, pg_restore %s)\n",
		output.HumanBytes(res.Ours.PeakRSS), output.HumanBytes(res.OursRestore.PeakRSS), output.HumanBytes(res.Ours.ChildrenRSS), output.HumanBytes(res.OursRestore.ChildrenRSS))
	return res, nil
}

// stepsLine lists a restore's steps with their seconds.
func stepsLine(steps []backup.StepTime) string {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = fmt.Sprintf("%s %.2fs", st.Step, st.Duration.Seconds())
	}
	return strings.Join(parts, ", ")
}

// jobsName says which restore -jobs picks.
func jobsName(n int) string {
	switch n {
	case 0:
		return "default: into a new database, swapped in"
	case 1:
		return "1: in one transaction"
	}
	return strconv.Itoa(n) + ": into a new database, swapped in"
}

// timed runs a plain PostgreSQL tool with the password in its environment.
func timed(ctx context.Context, srv *pgtest.Server, db, bin string, args ...string) (float64, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), srv.Env(db)...)
	out := &strings.Builder{}
	cmd.Stderr = out
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, out.String())
	}
	return time.Since(t).Seconds(), nil
}

// freeDisk is the space left to an unprivileged user on dir's filesystem, in bytes.
func freeDisk(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// loadAvg is the machine's load averages (1, 5, 15 minutes), as uptime prints them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "ABOVE TARGET"
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"G", 1 << 30}, {"M", 1 << 20}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 {
		return 0, errors.New("bad size " + strconv.Quote(s) + " (use e.g. 250MiB or 1GiB)")
	}
	return int64(f * float64(mult)), nil
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
