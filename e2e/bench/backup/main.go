// Command backup benchmarks polyaxon-deploy's database backup and restore
// against the plain tools in one session (pg_dump --format=custom, pg_restore
// --single-transaction) and in parallel (the directory format, -j one job per
// core), on a real PostgreSQL seeded with a realistic schema.
//
//	go run ./e2e/bench/backup [-sizes 250MiB,1GiB] [-runs 3]
//
// Our side runs in a child process (this binary re-executed) through the
// same library calls as `polyaxon-deploy backup --local` / `restore --local`
// (backup.Create, backup.Verify, backup.Restore with a LocalTarget), so its
// peak RSS is measured alone. Each restore is watched from the server: its
// WAL and buffer writes, and its sessions' wait events sampled as it runs.
// Prints each run, the medians, and each ratio's median and worst run with the
// load; exits 1 when the restored contents differ or -enforce is given and a
// ratio is above its target.
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
	"runtime"
	"slices"
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
	// Issue 59: and no restore run above 0.95× plain pg_restore's, whatever the load.
	worstRestoreRatio = 0.95
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
	peerJobs int // the parallel peers' jobs
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
	flag.IntVar(&o.peerJobs, "peer-jobs", runtime.NumCPU(), "jobs of the parallel peers, pg_dump -Fd -j and pg_restore -j")
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
		if !r.Identical || (o.enforce && slices.ContainsFunc(r.Ratios, ratio.above)) {
			failed = true
		}
	}
	fmt.Println()
	fmt.Println("summary")
	for _, r := range all {
		fmt.Printf("  %s (%s, %d rows), %d runs, load %s; contents identical: %v\n",
			output.HumanBytes(r.TargetSize), output.HumanBytes(r.DBSize), r.Rows, o.runs, loadRange(r.Loads), r.Identical)
		for _, ra := range r.Ratios {
			fmt.Println("    " + ra.String())
		}
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
	secs, _, err := timedCPU(ctx, srv, db, bin, args...)
	return secs, err
}

// timedCPU is timed, and the tool's CPU time (its children's included: pg_restore's jobs).
func timedCPU(ctx context.Context, srv *pgtest.Server, db, bin string, args ...string) (secs, cpu float64, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), srv.Env(db)...)
	out := &strings.Builder{}
	cmd.Stderr = out
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, out.String())
	}
	return time.Since(t).Seconds(), (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), nil
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
