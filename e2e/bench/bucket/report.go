package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// print prints run i (from 0).
func (r runResult) print(i int) {
	fmt.Printf("run %d (load %s; %s first):\n", i+1, r.load, r.first)
	fmt.Printf("  backup   %-30s %7.2fs  dump %s\n", "directory", r.dirBackup, output.HumanBytes(r.dirDumpSize))
	fmt.Printf("  backup   %-30s %7.2fs  dump %s; bucket checked %.2fs, into staging %.2fs, upload %.2fs (%s, %.0f MiB/s); store's data dir %s on disk\n",
		"bucket: staging + upload", r.bktBackup, output.HumanBytes(r.dumpSize), r.check, r.staged, r.upload, output.HumanBytes(r.files), mibps(r.files, r.upload), output.HumanBytes(r.storeUse))
	fmt.Printf("  restore  %-30s %7.2fs\n", "directory", r.dirRestore)
	fmt.Printf("  restore  %-30s %7.2fs  download %.2fs (%.0f MiB/s)\n", "bucket: download + restore", r.bktRestore, r.download, mibps(r.files, r.download))
	fmt.Printf("  bucket / directory: backup %.2f, restore %.2f; store's data dir once the backup is removed: %s\n",
		r.bktBackup/r.dirBackup, r.bktRestore/r.dirRestore, output.HumanBytes(r.storeLeft))
}

// print prints the medians and the ratios.
func (res *result) print() {
	col := func(f func(runResult) float64) []float64 {
		xs := make([]float64, len(res.runs))
		for i, r := range res.runs {
			xs[i] = f(r)
		}
		return xs
	}
	dirB, bktB := col(func(r runResult) float64 { return r.dirBackup }), col(func(r runResult) float64 { return r.bktBackup })
	dirR, bktR := col(func(r runResult) float64 { return r.dirRestore }), col(func(r runResult) float64 { return r.bktRestore })
	check, staged := col(func(r runResult) float64 { return r.check }), col(func(r runResult) float64 { return r.staged })
	up, down := col(func(r runResult) float64 { return r.upload }), col(func(r runResult) float64 { return r.download })
	upRate := col(func(r runResult) float64 { return mibps(r.files, r.upload) })
	downRate := col(func(r runResult) float64 { return mibps(r.files, r.download) })
	loads := make([]string, len(res.runs))
	var files, dump, use, left int64
	for i, r := range res.runs {
		loads[i] = r.load
		files, dump, use, left = max(files, r.files), max(dump, r.dumpSize), max(use, r.storeUse), max(left, r.storeLeft)
	}

	fmt.Println()
	fmt.Printf("summary: %s asked, %s seeded (%d rows, %d tables), %d run(s), load (1 min) %s\n",
		output.HumanBytes(res.size), output.HumanBytes(res.dbSize), res.rows, res.tables, len(res.runs), loadRange(loads))
	fmt.Printf("  dump %s; the backup's files %s; the store's data dir %s on disk with one backup, %s once it is removed\n",
		output.HumanBytes(dump), output.HumanBytes(files), output.HumanBytes(use), output.HumanBytes(left))
	fmt.Println("  medians")
	fmt.Printf("    backup   %-30s %7.2fs\n", "directory", median(dirB))
	fmt.Printf("    backup   %-30s %7.2fs  bucket checked %.2fs, into staging %.2fs, upload %.2fs (%.0f MiB/s)\n",
		"bucket: staging + upload", median(bktB), median(check), median(staged), median(up), median(upRate))
	fmt.Printf("    restore  %-30s %7.2fs\n", "directory", median(dirR))
	fmt.Printf("    restore  %-30s %7.2fs  of which the download %.2fs (%.0f MiB/s)\n", "bucket: download + restore", median(bktR), median(down), median(downRate))
	fmt.Println("  ratios, bucket / directory, run by run")
	fmt.Println("    " + ratioLine("backup", bktB, dirB))
	fmt.Println("    " + ratioLine("restore", bktR, dirR))
	fmt.Printf("  restored contents identical to the seed (%d tables, every restore of every run): %v\n", res.tables, res.identical)
}

// ratioLine is the ratios a[i]/b[i]: their median, the worst, and each run's.
func ratioLine(op string, a, b []float64) string {
	rs := make([]float64, len(a))
	parts := make([]string, len(a))
	for i := range a {
		rs[i] = a[i] / b[i]
		parts[i] = strconv.FormatFloat(rs[i], 'f', 2, 64)
	}
	return fmt.Sprintf("%-7s median %.2f  worst %.2f  (runs %s)", op, median(rs), slices.Max(rs), strings.Join(parts, " "))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mibps is bytes over secs in MiB/s.
func mibps(bytes int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / secs
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

// loadRange is the lowest and highest 1-minute load average among loads.
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

// dirSize is the size of a directory's files.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// diskUse is what a directory takes on disk (its files' and directories' blocks), as du says.
func diskUse(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// freeDisk is the space left to an unprivileged user on dir's filesystem.
func freeDisk(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}
