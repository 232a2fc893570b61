package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The local provider's processes: which belong to a cluster, and waiting for them to end.

// PIDs are the process ids kwokctl recorded for the cluster's components.
func (p *Provider) PIDs(name string) ([]int, error) {
	files, err := filepath.Glob(filepath.Join(p.ClusterDir(name), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// ProcessAlive reports whether pid runs (zombies count as exited).
func ProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Format: pid (comm) state ...; comm may contain spaces, so read after the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func waitExited(ctx context.Context, pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var alive []int
		for _, pid := range pids {
			if ProcessAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return alive
		}
		time.Sleep(100 * time.Millisecond)
	}
}
