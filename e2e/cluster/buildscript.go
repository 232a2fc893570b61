package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// RepoRoot is the repository root, found from this source file's location.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("cannot locate the repository from the binary (built with -trimpath?)")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
}

// RunBuildScript runs e2e/scripts/<name>, one of the scripts that build a program from the Go
// module proxy into a cache outside the repository (a no-op once cached), with its progress on
// progress (may be nil). It returns the last want lines of what the script printed on stdout:
// the paths it made, in the order its usage says.
func RunBuildScript(ctx context.Context, name string, want int, progress io.Writer) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	script := filepath.Join(root, "e2e", "scripts", name)
	if progress == nil {
		progress = io.Discard
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < want || strings.TrimSpace(lines[len(lines)-1]) == "" {
		return nil, fmt.Errorf("%s printed %q, want %d path(s)", script, out.String(), want)
	}
	lines = lines[len(lines)-want:]
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return lines, nil
}

// EnsureExporters builds the exporters the chart runs beside its stores, postgres_exporter and
// redis_exporter, from the Go module proxy (e2e/scripts/build-exporters.sh; cached) and returns
// the directory holding both.
func EnsureExporters(ctx context.Context, progress io.Writer) (string, error) {
	p, err := RunBuildScript(ctx, "build-exporters.sh", 1, progress)
	if err != nil {
		return "", err
	}
	return p[0], nil
}

// MonitoringBuild is what build-monitoring.sh made: the directory of the Prometheus server and
// kube-state-metrics, and the directory of the Prometheus Operator's CRDs.
type MonitoringBuild struct {
	Bin, CRDs string
}

// EnsureMonitoring builds Prometheus and kube-state-metrics from the Go module proxy
// (e2e/scripts/build-monitoring.sh; cached) and finds the Prometheus Operator's CRDs.
func EnsureMonitoring(ctx context.Context, progress io.Writer) (MonitoringBuild, error) {
	p, err := RunBuildScript(ctx, "build-monitoring.sh", 2, progress)
	if err != nil {
		return MonitoringBuild{}, err
	}
	return MonitoringBuild{Bin: p[0], CRDs: p[1]}, nil
}
