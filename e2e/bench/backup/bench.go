package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// The contestants: ours, the plain tools in one session, and the plain tools in parallel (the
// directory format, one job per core), which is what a user who wants speed would pick.
const (
	ours         = "ours"
	plainDump    = "pg_dump -Fc"
	plainRestore = "pg_restore --single-transaction"
)

func parallelDump(jobs int) string    { return fmt.Sprintf("pg_dump -Fd -j %d", jobs) }
func parallelRestore(jobs int) string { return fmt.Sprintf("pg_restore -Fd -j %d", jobs) }

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
	// A restore's steps (ours) and what the server did, run by run.
	Steps  [][]backup.StepTime `json:"steps,omitempty"`
	Server []observation       `json:"server,omitempty"`
}

// ratio compares ours with a peer, run by run: each run's ratio is ours over the peer's in that
// run, so that what changed between runs (the load, the caches) hits both.
type ratio struct {
	Op     string    `json:"op"`
	Peer   string    `json:"peer"`
	Runs   []float64 `json:"runs"`
	Median float64   `json:"median"`
	Worst  float64   `json:"worst"`
	Target float64   `json:"target,omitempty"`
}

func newRatio(op, peer string, ours, theirs []float64, target float64) ratio {
	r := ratio{Op: op, Peer: peer, Target: target}
	for i := range min(len(ours), len(theirs)) {
		r.Runs = append(r.Runs, ours[i]/theirs[i])
	}
	r.Median, r.Worst = median(r.Runs), slices.Max(r.Runs)
	return r
}

// above says whether the ratio misses its targets: the median's, and for a restore no run
// above worstRestoreRatio.
func (r ratio) above() bool {
	return r.Target > 0 && (r.Median > r.Target || (r.Op == "restore" && r.Worst > worstRestoreRatio))
}

func (r ratio) String() string {
	s := fmt.Sprintf("%-7s ours / %-32s median %.2f  worst %.2f  (runs %s)", r.Op, r.Peer, r.Median, r.Worst, joinFloats(r.Runs))
	if r.Target > 0 {
		s += fmt.Sprintf("  target: median <= %.2f", r.Target)
		if r.Op == "restore" {
			s += fmt.Sprintf(", every run <= %.2f", worstRestoreRatio)
		}
		s += " " + passFail(!r.above())
	}
	return s
}

type sizeResult struct {
	TargetSize int64               `json:"targetSize"`
	DBSize     int64               `json:"dbSize"`
	Rows       int                 `json:"rows"`
	Backup     map[string]*measure `json:"backup"`
	Restore    map[string]*measure `json:"restore"`
	Ratios     []ratio             `json:"ratios"`
	Loads      []string            `json:"loads"` // the load averages as each run began
	Identical  bool                `json:"identical"`
}

// contestant is one way of doing the operation a run times.
type contestant struct {
	name string
	run  func(i int) (seconds float64, note string, err error)
}

// inTurn runs each contestant once per run, the first going last in the next run, so that
// drift (caches, other load) hits all alike. line prints a run's results.
func inTurn(runs int, cs []contestant, loads *[]string, record func(name string, secs float64)) error {
	for i := range runs {
		load := loadAvg()
		*loads = append(*loads, load)
		order := append(slices.Clone(cs[i%len(cs):]), cs[:i%len(cs)]...)
		secs, notes := map[string]float64{}, map[string]string{}
		for _, c := range order {
			s, note, err := c.run(i)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			secs[c.name], notes[c.name] = s, note
			record(c.name, s)
		}
		fmt.Printf("  run %d (load %s):\n", i+1, load)
		for _, c := range cs {
			fmt.Printf("    %-32s %7.2fs  %s\n", c.name, secs[c.name], notes[c.name])
		}
	}
	return nil
}

func benchSize(ctx context.Context, o options, size int64) (*sizeResult, error) {
	res := &sizeResult{TargetSize: size, Backup: map[string]*measure{}, Restore: map[string]*measure{}}
	fmt.Printf("== database of about %s ==\n", output.HumanBytes(size))
	srv, err := pgtest.Start(ctx,
		pgtest.WithSetting("max_wal_size", o.maxWAL),
		pgtest.WithSetting("checkpoint_timeout", "30min"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	version, err := serverVersion(ctx, srv)
	if err != nil {
		return nil, err
	}

	t0 := time.Now()
	runs, err := pgtest.SeedTo(ctx, srv, srv.Database, size)
	if err != nil {
		return nil, err
	}
	if res.DBSize, err = pgtest.DatabaseSize(ctx, srv, srv.Database); err != nil {
		return nil, err
	}
	res.Rows = pgtest.RowsFor(runs)
	fmt.Printf("seeded %s (%d rows, %d runs) in %s with PostgreSQL %d in %s\n", output.HumanBytes(res.DBSize), res.Rows, runs, since(t0), version, srv.BinDir)
	want, err := pgtest.Checksums(ctx, srv, srv.Database)
	if err != nil {
		return nil, err
	}

	dir := filepath.Join(o.workdir, strconv.FormatInt(size, 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	plainFile, parallelDir := filepath.Join(dir, "plain.dump"), filepath.Join(dir, "parallel.d")
	jobs := strconv.Itoa(o.peerJobs)
	var lastOurs string
	m := func(set map[string]*measure, name string) *measure {
		if set[name] == nil {
			set[name] = &measure{}
		}
		return set[name]
	}

	fmt.Println("backup")
	err = inTurn(o.runs, []contestant{
		{ours, func(int) (float64, string, error) {
			_ = os.RemoveAll(filepath.Join(dir, "ours"))
			cr, err := runChild(ctx, srv, "backup", srv.Database, filepath.Join(dir, "ours"), o)
			if err != nil {
				return 0, "", err
			}
			me := m(res.Backup, ours)
			me.Bytes, lastOurs = cr.Bytes, cr.Dir
			me.PeakRSS, me.ChildrenRSS = max(me.PeakRSS, cr.MaxRSS), max(me.ChildrenRSS, cr.ChildrenRSS)
			me.Extra = cr.VerifySeconds
			me.CPU, me.ToolCPU = append(me.CPU, cr.CPUSeconds), append(me.ToolCPU, cr.ToolCPUSeconds)
			return cr.Seconds, fmt.Sprintf("%s, %s, verify %.2fs; CPU: our process %.2fs, its pg_dump and psql %.2fs",
				output.HumanBytes(cr.Bytes), cr.Layout, cr.VerifySeconds, cr.CPUSeconds, cr.ToolCPUSeconds), nil
		}},
		{plainDump, func(int) (float64, string, error) {
			secs, err := timed(ctx, srv, srv.Database, srv.Bin("pg_dump"), "--format=custom", "--file="+plainFile)
			m(res.Backup, plainDump).Bytes = fileSize(plainFile)
			return secs, output.HumanBytes(fileSize(plainFile)), err
		}},
		{parallelDump(o.peerJobs), func(int) (float64, string, error) {
			_ = os.RemoveAll(parallelDir)
			secs, err := timed(ctx, srv, srv.Database, srv.Bin("pg_dump"), "--format=directory", "--jobs="+jobs, "--file="+parallelDir)
			m(res.Backup, parallelDump(o.peerJobs)).Bytes = dirSize(parallelDir)
			return secs, output.HumanBytes(dirSize(parallelDir)), err
		}},
	}, &res.Loads, func(name string, secs float64) {
		m(res.Backup, name).Seconds = append(m(res.Backup, name).Seconds, secs)
	})
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}

	// The source is not needed any more (its checksums are taken): dropped, it leaves room for
	// the restored copies, so that a bench needs the disk of two copies of the database and
	// its three dumps.
	if _, err := srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", srv.Database)); err != nil {
		return nil, err
	}
	fmt.Printf("restore (free disk %s)\n", output.HumanBytes(freeDisk(dir)))

	res.Identical = true
	// restore restores into a new database db with run, from a checkpoint so that no one pays
	// for another's dirty buffers, with the server observed; the copy is checked in the first
	// run, then dropped.
	restore := func(i int, name, db string, run func() (secs float64, note string, err error)) (float64, string, error) {
		if err := srv.CreateDatabase(ctx, db); err != nil {
			return 0, "", err
		}
		if _, err := srv.Psql(ctx, "postgres", "CHECKPOINT"); err != nil {
			return 0, "", err
		}
		var secs float64
		var note string
		obs, err := observe(ctx, srv, version, func() (err error) {
			secs, note, err = run()
			return err
		})
		if err != nil {
			return 0, "", err
		}
		me := m(res.Restore, name)
		me.Server = append(me.Server, obs)
		if i == 0 {
			got, err := pgtest.Checksums(ctx, srv, db)
			if err != nil {
				return 0, "", err
			}
			if !maps.Equal(want, got) {
				res.Identical = false
				fmt.Printf("  CONTENTS DIFFER in %s (%s): want %v got %v\n", db, name, want, got)
			}
		}
		if _, err := srv.Psql(ctx, "postgres", fmt.Sprintf("DROP DATABASE %q", db)); err != nil {
			return 0, "", err
		}
		if note != "" {
			note += "\n" + strings.Repeat(" ", 44)
		}
		return secs, note + fmt.Sprintf("server: CPU %.2fs; ", obs.CPUSeconds) + obs.Counters.String() + "\n" + strings.Repeat(" ", 44) + "busy: " + obs.Waits.String(), nil
	}
	err = inTurn(o.runs, []contestant{
		{ours, func(i int) (float64, string, error) {
			db := fmt.Sprintf("r_ours_%d", i)
			return restore(i, ours, db, func() (float64, string, error) {
				cr, err := runChild(ctx, srv, "restore", db, lastOurs, o)
				if err != nil {
					return 0, "", err
				}
				me := m(res.Restore, ours)
				me.PeakRSS, me.ChildrenRSS = max(me.PeakRSS, cr.MaxRSS), max(me.ChildrenRSS, cr.ChildrenRSS)
				me.Steps = append(me.Steps, cr.Steps)
				return cr.Seconds, fmt.Sprintf("client CPU %.2fs (our process %.2fs); sha256 and row counts included; %s: %s",
					cr.CPUSeconds+cr.ToolCPUSeconds, cr.CPUSeconds, cr.Way, stepsLine(cr.Steps)), nil
			})
		}},
		{plainRestore, func(i int) (float64, string, error) {
			db := fmt.Sprintf("r_plain_%d", i)
			return restore(i, plainRestore, db, func() (float64, string, error) {
				secs, cpu, err := timedCPU(ctx, srv, db, srv.Bin("pg_restore"), "--clean", "--if-exists", "--single-transaction", "--no-owner", "--dbname="+db, plainFile)
				return secs, fmt.Sprintf("client CPU %.2fs", cpu), err
			})
		}},
		{parallelRestore(o.peerJobs), func(i int) (float64, string, error) {
			db := fmt.Sprintf("r_parallel_%d", i)
			return restore(i, parallelRestore(o.peerJobs), db, func() (float64, string, error) {
				secs, cpu, err := timedCPU(ctx, srv, db, srv.Bin("pg_restore"), "--exit-on-error", "--no-owner", "--jobs="+jobs, "--dbname="+db, parallelDir)
				return secs, fmt.Sprintf("client CPU %.2fs", cpu), err
			})
		}},
	}, new([]string), func(name string, secs float64) {
		m(res.Restore, name).Seconds = append(m(res.Restore, name).Seconds, secs)
	})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	for _, set := range []map[string]*measure{res.Backup, res.Restore} {
		for _, me := range set {
			me.Median = median(me.Seconds)
		}
	}
	res.Ratios = []ratio{
		newRatio("backup", plainDump, res.Backup[ours].Seconds, res.Backup[plainDump].Seconds, targetRatio),
		newRatio("backup", parallelDump(o.peerJobs), res.Backup[ours].Seconds, res.Backup[parallelDump(o.peerJobs)].Seconds, 0),
		newRatio("restore", plainRestore, res.Restore[ours].Seconds, res.Restore[plainRestore].Seconds, targetRestoreRatio),
		newRatio("restore", parallelRestore(o.peerJobs), res.Restore[ours].Seconds, res.Restore[parallelRestore(o.peerJobs)].Seconds, 0),
	}
	fmt.Println("medians")
	for _, op := range []struct {
		name string
		set  map[string]*measure
	}{{"backup", res.Backup}, {"restore", res.Restore}} {
		for _, name := range slices.Sorted(maps.Keys(op.set)) {
			me := op.set[name]
			fmt.Printf("  %-7s %-32s %7.2fs", op.name, name, me.Median)
			if me.Bytes > 0 {
				fmt.Printf("  %s", output.HumanBytes(me.Bytes))
			}
			fmt.Println()
		}
	}
	fmt.Printf("  our backup's CPU: our process %.2fs, its pg_dump and psql %.2fs; peak RSS of our process: backup %s, restore %s\n",
		median(res.Backup[ours].CPU), median(res.Backup[ours].ToolCPU), output.HumanBytes(res.Backup[ours].PeakRSS), output.HumanBytes(res.Restore[ours].PeakRSS))
	fmt.Printf("ratios (load %s)\n", loadRange(res.Loads))
	for _, r := range res.Ratios {
		fmt.Println("  " + r.String())
	}
	fmt.Printf("restored contents identical (%d tables, every restore of the first run): %v\n", len(want), res.Identical)
	return res, nil
}

// fileSize is the size of a file, 0 when it cannot be read.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// dirSize is the size of a directory's files.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n += fileSize(path)
		}
		return nil
	})
	return n
}

// loadRange is the lowest and highest 1-minute load average among loads (uptime's three
// figures each).
func loadRange(loads []string) string {
	var ones []float64
	for _, l := range loads {
		if f, err := strconv.ParseFloat(strings.Fields(l + " ?")[0], 64); err == nil {
			ones = append(ones, f)
		}
	}
	if len(ones) == 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(ones), slices.Max(ones))
}

func joinFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}
