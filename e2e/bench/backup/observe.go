package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// What the server did during one restore, from PostgreSQL itself: its WAL and buffer-write
// counters before and after, and what its backends were doing, sampled while it ran. These say
// whether a restore waited on the CPU, the disk, the WAL or its client.

// serverCounters are the cumulative statistics a restore moves.
type serverCounters struct {
	WALRecords, WALFPI, WALBytes, WALBuffersFull, WALWrites, WALSyncs int64
	Checkpoints, BuffersCheckpoint, BuffersClean, BuffersBackend      int64
}

// countersSQL reads serverCounters from pg_stat_wal (PostgreSQL 14 and later) and the
// checkpointer's statistics, which PostgreSQL 17 moved to pg_stat_checkpointer (where the
// backends' writes are in pg_stat_io instead).
func countersSQL(version int) string {
	const wal = "w.wal_records, w.wal_fpi, w.wal_bytes::bigint, w.wal_buffers_full, w.wal_write, w.wal_sync"
	if version >= 170000 {
		return "SELECT " + wal + ", c.num_timed + c.num_requested, c.buffers_written, b.buffers_clean, " +
			"(SELECT coalesce(sum(writes), 0)::bigint FROM pg_stat_io WHERE backend_type = 'client backend') " +
			"FROM pg_stat_wal w, pg_stat_checkpointer c, pg_stat_bgwriter b"
	}
	return "SELECT " + wal + ", b.checkpoints_timed + b.checkpoints_req, b.buffers_checkpoint, b.buffers_clean, b.buffers_backend " +
		"FROM pg_stat_wal w, pg_stat_bgwriter b"
}

func readCounters(ctx context.Context, srv *pgtest.Server, version int) (serverCounters, error) {
	// The statistics of sessions that just ended may not be flushed yet: ask for a snapshot of
	// the shared counters as they stand.
	out, err := srv.Psql(ctx, "postgres", "SELECT pg_stat_clear_snapshot();\n"+countersSQL(version))
	if err != nil {
		return serverCounters{}, err
	}
	lines := strings.Split(out, "\n")
	f := strings.Split(lines[len(lines)-1], "|")
	var c serverCounters
	dst := []*int64{&c.WALRecords, &c.WALFPI, &c.WALBytes, &c.WALBuffersFull, &c.WALWrites, &c.WALSyncs,
		&c.Checkpoints, &c.BuffersCheckpoint, &c.BuffersClean, &c.BuffersBackend}
	if len(f) != len(dst) {
		return c, fmt.Errorf("server counters: %q", out)
	}
	for i, p := range dst {
		if *p, err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return c, fmt.Errorf("server counters: %q: %w", out, err)
		}
	}
	return c, nil
}

func (c serverCounters) minus(b serverCounters) serverCounters {
	return serverCounters{c.WALRecords - b.WALRecords, c.WALFPI - b.WALFPI, c.WALBytes - b.WALBytes,
		c.WALBuffersFull - b.WALBuffersFull, c.WALWrites - b.WALWrites, c.WALSyncs - b.WALSyncs,
		c.Checkpoints - b.Checkpoints, c.BuffersCheckpoint - b.BuffersCheckpoint, c.BuffersClean - b.BuffersClean,
		c.BuffersBackend - b.BuffersBackend}
}

func (c serverCounters) String() string {
	const page = 8192
	return fmt.Sprintf("WAL %s (%d full-page images, %d writes, %d syncs, buffers full %d); checkpoints %d; pages written by the checkpointer %s, the background writer %s, the backends %s",
		output.HumanBytes(c.WALBytes), c.WALFPI, c.WALWrites, c.WALSyncs, c.WALBuffersFull, c.Checkpoints,
		output.HumanBytes(c.BuffersCheckpoint*page), output.HumanBytes(c.BuffersClean*page), output.HumanBytes(c.BuffersBackend*page))
}

// waitSampleSQL is one line per sample: each busy server process's type and what it waits on
// ("CPU" when it waits on nothing). Client sessions count while a statement runs; the server's
// own processes unless they idle in their main loop (wait type Activity).
const waitSampleSQL = `SELECT coalesce(string_agg(backend_type || '=' || coalesce(wait_event_type || ':' || wait_event, 'CPU'), ','), '-') ` +
	`FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND ` +
	`CASE WHEN backend_type IN ('client backend', 'parallel worker') THEN state = 'active' ELSE wait_event_type IS DISTINCT FROM 'Activity' END`

// waitSampler samples pg_stat_activity every interval from one psql session (\watch), so that
// sampling costs one process, not one per sample.
type waitSampler struct {
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	samples int
	counts  map[string]int
}

func startWaitSampler(ctx context.Context, srv *pgtest.Server, interval string) (*waitSampler, error) {
	cmd := exec.CommandContext(ctx, srv.Bin("psql"), "-X", "-q", "-A", "-t", "-d", "postgres")
	cmd.Env = append(os.Environ(), srv.Env("postgres")...)
	cmd.Stdin = strings.NewReader(waitSampleSQL + " \\watch " + interval + "\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &waitSampler{cmd: cmd, done: make(chan struct{}), counts: map[string]int{}}
	go w.read(out)
	return w, nil
}

func (w *waitSampler) read(out io.Reader) {
	defer close(w.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		w.mu.Lock()
		w.samples++
		if line != "-" {
			for _, busy := range strings.Split(line, ",") {
				w.counts[busy]++
			}
		}
		w.mu.Unlock()
	}
}

// waits is what a sampler saw: each state's average count of processes in it.
type waits struct {
	Samples int                `json:"samples"`
	Average map[string]float64 `json:"average"`
}

// stop ends the sampling and returns the averages.
func (w *waitSampler) stop() waits {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait() // closes psql's output once it exited, whoever still holds it
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := waits{Samples: w.samples, Average: map[string]float64{}}
	for k, n := range w.counts {
		out.Average[k] = float64(n) / float64(max(w.samples, 1))
	}
	return out
}

// String lists the states that held at least 0.05 processes on average, busiest first.
func (w waits) String() string {
	keys := make([]string, 0, len(w.Average))
	for k, v := range w.Average {
		if v >= 0.05 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return w.Average[keys[i]] > w.Average[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", strings.TrimPrefix(k, "client backend="), w.Average[k])
	}
	return fmt.Sprintf("%s (%d samples)", strings.Join(parts, ", "), w.Samples)
}

// observation is what the server did during one restore.
type observation struct {
	Counters serverCounters `json:"counters"`
	Waits    waits          `json:"waits"`
	// CPUSeconds is the server's CPU time, every process of it.
	CPUSeconds float64 `json:"cpuSeconds"`
}

// clockTicks is the unit of /proc's CPU times, USER_HZ, which Linux fixes at 100 for user space.
const clockTicks = 100

// serverCPU is the CPU time, in seconds, of the server: the postmaster's, its reaped children's
// (every session that ended), and its live children's. The difference of two readings is the
// CPU time spent between them, a process that ended in between included. A session reaped
// while its siblings are read would be in neither sum, so the reading is taken again until the
// postmaster reaped no one during it.
func serverCPU(srv *pgtest.Server) (float64, error) {
	b, err := os.ReadFile(filepath.Join(srv.DataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	for {
		before, err := procStat(pid)
		if err != nil {
			return 0, err
		}
		children, err := childrenTicks(pid)
		if err != nil {
			return 0, err
		}
		after, err := procStat(pid)
		if err != nil {
			return 0, err
		}
		if after.cutime+after.cstime == before.cutime+before.cstime {
			return float64(after.utime+after.stime+after.cutime+after.cstime+children) / clockTicks, nil
		}
	}
}

// childrenTicks is the CPU time of parent's live children, in clock ticks.
func childrenTicks(parent int) (int64, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(pid); err == nil && st.ppid == int64(parent) {
			ticks += st.utime + st.stime
		}
	}
	return ticks, nil
}

type procTimes struct{ ppid, utime, stime, cutime, cstime int64 }

// procStat reads a process's parent and CPU times from /proc/<pid>/stat (proc(5)): the fields
// after the command's closing parenthesis, which may itself hold spaces and parentheses.
func procStat(pid int) (procTimes, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procTimes{}, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14 to 17.
	if len(f) < 15 {
		return procTimes{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i-3], 10, 64); return v }
	return procTimes{ppid: n(4), utime: n(14), stime: n(15), cutime: n(16), cstime: n(17)}, nil
}

// observe runs fn while sampling the server, and returns what it saw.
func observe(ctx context.Context, srv *pgtest.Server, version int, fn func() error) (observation, error) {
	before, err := readCounters(ctx, srv, version)
	if err != nil {
		return observation{}, err
	}
	cpuBefore, err := serverCPU(srv)
	if err != nil {
		return observation{}, err
	}
	sampler, err := startWaitSampler(ctx, srv, "0.2")
	if err != nil {
		return observation{}, err
	}
	runErr := fn()
	cpuAfter, cpuErr := serverCPU(srv)
	w := sampler.stop()
	if runErr != nil {
		return observation{}, runErr
	}
	after, err := readCounters(ctx, srv, version)
	if err != nil {
		return observation{}, err
	}
	if cpuErr != nil {
		return observation{}, cpuErr
	}
	return observation{Counters: after.minus(before), Waits: w, CPUSeconds: cpuAfter - cpuBefore}, nil
}

// serverVersion is the server's server_version_num.
func serverVersion(ctx context.Context, srv *pgtest.Server) (int, error) {
	out, err := srv.Psql(ctx, "postgres", "SHOW server_version_num")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}
