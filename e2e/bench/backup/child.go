package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// Our side of the bench runs in a child process (this binary re-executed), so that its CPU
// time and peak RSS are its own.

type childResult struct {
	Seconds       float64 `json:"seconds"`
	VerifySeconds float64 `json:"verifySeconds"`
	Bytes         int64   `json:"bytes"`
	Dir           string  `json:"dir"`
	MaxRSS        int64   `json:"maxRSS"`
	// CPU time: this process's, and its children's (pg_dump, pg_restore, psql); a backup's
	// without its verify.
	CPUSeconds     float64 `json:"cpuSeconds,omitempty"`
	ToolCPUSeconds float64 `json:"toolCPUSeconds,omitempty"`
	ChildrenRSS    int64   `json:"childrenRSS"`
	// A backup's layout (one archive, N parallel streams).
	Layout string `json:"layout,omitempty"`
	// A restore's way and steps (backup.RestoreReport).
	Way   string            `json:"way,omitempty"`
	Steps []backup.StepTime `json:"steps,omitempty"`
}

// runChild re-executes this binary to run our backup or restore alone.
func runChild(ctx context.Context, srv *pgtest.Server, op, db, dir string, o options) (*childResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(),
		childEnv+"="+op,
		"BENCH_HOST="+srv.Host, "BENCH_PORT="+strconv.Itoa(srv.Port), "BENCH_USER="+srv.User, "BENCH_DB="+db,
		"BENCH_DIR="+dir, "BENCH_BIN="+srv.BinDir, "BENCH_CODEC="+o.codec, "BENCH_LEVEL="+strconv.Itoa(o.level), "BENCH_JOBS="+strconv.Itoa(o.jobs), "BENCH_DUMP_JOBS="+strconv.Itoa(o.dumpJobs), "BENCH_LOG="+o.restoreLog,
		passwordEnv+"="+srv.Password())
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("child output %q: %w", out, err)
	}
	return &r, nil
}

// child runs one backup (Create then Verify, as the CLI does) or one
// restore, and prints timings and its own peak RSS as JSON.
func child() int {
	ctx := context.Background()
	port, _ := strconv.Atoi(os.Getenv("BENCH_PORT"))
	target := backup.NewLocalTarget(backup.Conn{
		Host: os.Getenv("BENCH_HOST"), Port: port, User: os.Getenv("BENCH_USER"), Database: os.Getenv("BENCH_DB"),
		Password: os.Getenv(passwordEnv),
	}, backup.WithLocalBinDir(os.Getenv("BENCH_BIN")))
	_ = os.Unsetenv(passwordEnv)
	level, _ := strconv.Atoi(os.Getenv("BENCH_LEVEL"))
	tools := backup.WithToolsDir(os.Getenv("BENCH_BIN"))
	var r childResult
	t := time.Now()
	switch os.Getenv(childEnv) {
	case "backup":
		dumpJobs, _ := strconv.Atoi(os.Getenv("BENCH_DUMP_JOBS"))
		m, err := backup.Create(ctx, target, backup.WithOutputDir(os.Getenv("BENCH_DIR")),
			backup.WithRelease(backup.ReleaseInfo{Name: "bench"}),
			backup.WithCompression(os.Getenv("BENCH_CODEC"), level), backup.WithDumpJobs(dumpJobs))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Seconds, r.Bytes, r.Dir, r.Layout = time.Since(t).Seconds(), m.DumpSize, m.Dir, m.Layout()
		r.CPUSeconds, r.ToolCPUSeconds = cpuSeconds(syscall.RUSAGE_SELF), cpuSeconds(syscall.RUSAGE_CHILDREN)
		tv := time.Now()
		if _, err := backup.Verify(ctx, m.Dir, tools); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.VerifySeconds = time.Since(tv).Seconds()
	case "restore":
		jobs, _ := strconv.Atoi(os.Getenv("BENCH_JOBS"))
		opts := []backup.RestoreOption{tools, backup.WithJobs(jobs)}
		if f := os.Getenv("BENCH_LOG"); f != "" {
			lf, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err == nil {
				defer lf.Close()
				opts = append(opts, backup.WithLogger(slog.New(slog.NewTextHandler(lf, nil))))
			}
		}
		rep, err := backup.Restore(ctx, target, os.Getenv("BENCH_DIR"), opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Seconds, r.Way, r.Steps = time.Since(t).Seconds(), rep.Way, rep.Steps
		r.CPUSeconds, r.ToolCPUSeconds = cpuSeconds(syscall.RUSAGE_SELF), cpuSeconds(syscall.RUSAGE_CHILDREN)
	default:
		fmt.Fprintln(os.Stderr, "unknown child operation")
		return 2
	}
	// VmHWM, not getrusage(RUSAGE_SELF): Linux carries the parent's high
	// water mark across fork+exec into ru_maxrss, VmHWM is this image's own.
	r.MaxRSS = vmHWM()
	var kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	r.ChildrenRSS = kids.Maxrss * 1024 // KiB; an upper bound for the same reason
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// cpuSeconds is the user and system CPU time of this process (who: RUSAGE_SELF) or of its
// waited-for children (RUSAGE_CHILDREN) so far.
func cpuSeconds(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// vmHWM is the peak resident set size of this process, from /proc.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
