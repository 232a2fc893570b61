// Command chartscan is `make scan`: it renders the chart for every profile, alone and with
// each documented values file, runs trivy's misconfiguration checks on the manifests offline,
// and fails on any HIGH or CRITICAL finding that the ignore file does not accept (and on
// ignore entries that match nothing). Exit 0: the gate passes; 1: it fails or the scan broke.
//
//	go run ./e2e/cmd/chartscan -trivy $(e2e/scripts/build-trivy.sh) [-ignore scan-ignore.txt] [-keep DIR]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/scan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func main() {
	trivy := flag.String("trivy", "", "path of the trivy binary (make scan builds it: e2e/scripts/build-trivy.sh)")
	ignoreFile := flag.String("ignore", "scan-ignore.txt", "ignore file: one `CHECK-ID Kind/name reason` per line")
	valuesDir := flag.String("values", "values", "directory of the documented values files (*.yaml; sub-directories are not values files)")
	keep := flag.String("keep", "", "write the manifests and trivy's report into this directory and keep them (default: a temporary directory, removed)")
	flag.Parse()
	if *trivy == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: chartscan -trivy PATH [-ignore FILE] [-values DIR] [-keep DIR]")
		os.Exit(2)
	}
	ok, err := run(*trivy, *ignoreFile, *valuesDir, *keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartscan:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(trivy, ignoreFile, valuesDir, keep string) (bool, error) {
	ignores, err := scan.ReadIgnoreFile(ignoreFile)
	if err != nil {
		return false, err
	}
	renders, err := plan(valuesDir)
	if err != nil {
		return false, err
	}

	dir := keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "chartscan-"); err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
	}
	manifests := filepath.Join(dir, "manifests")
	if err := os.RemoveAll(manifests); err != nil {
		return false, err
	}
	ch, err := render.LoadFS(charts.FS, charts.Root)
	if err != nil {
		return false, err
	}
	scanned := make([]scan.Render, 0, len(renders))
	for _, r := range renders {
		objects, err := r.write(ch, filepath.Join(manifests, r.name))
		if err != nil {
			return false, fmt.Errorf("render %s: %w", r.name, err)
		}
		fmt.Fprintf(os.Stderr, "rendered %s: %d objects\n", r.name, len(objects))
		scanned = append(scanned, scan.Render{Name: r.name, Objects: objects})
	}

	report := filepath.Join(dir, "trivy.json")
	start := time.Now()
	if err := runTrivy(trivy, dir, manifests, report); err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "trivy config: %d renders in %s\n\n", len(renders), time.Since(start).Round(100*time.Millisecond))
	data, err := os.ReadFile(report)
	if err != nil {
		return false, err
	}
	rep, err := scan.ParseReport(data)
	if err != nil {
		return false, err
	}
	res, err := scan.Evaluate(rep, scanned, ignores)
	if err != nil {
		return false, err
	}
	if err := res.WriteTable(os.Stdout, ignoreFile); err != nil {
		return false, err
	}
	return res.Passed(), nil
}

// renderSpec is one render: a profile, and at most one documented values file on top.
type renderSpec struct {
	name       string // production, or production+ssl-ingress
	profile    string
	valuesFile string
}

// plan lists every profile alone, then every profile with each values file in valuesDir. A
// profile's own values file (values/production.yaml, for the chart alone) is the profile's
// values again: the chart with it renders what the profile alone renders, already scanned.
func plan(valuesDir string) ([]renderSpec, error) {
	files, err := filepath.Glob(filepath.Join(valuesDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no values files in %s (run from the repository root, or pass -values DIR)", valuesDir)
	}
	sort.Strings(files)
	names := profile.Names()
	var out []renderSpec
	for _, p := range names {
		out = append(out, renderSpec{name: p, profile: p})
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".yaml")
			if slices.Contains(names, base) {
				continue
			}
			if ok, err := values.ExampleFor(f, p); err != nil {
				return nil, err
			} else if !ok {
				continue // not for this profile, by its own "# profiles:" line
			}
			out = append(out, renderSpec{name: p + "+" + base, profile: p, valuesFile: f})
		}
	}
	return out, nil
}

// write renders the chart as `polyaxon-deploy render --profile P [-f FILE]` does and writes each
// object (CRDs, objects, hooks) to its own file in dir, named by scan.ObjectFile. It returns
// the objects written, as Kind/name.
// releaseNamespace is the namespace every render is made for.
const releaseNamespace = "polyaxon"

func (r renderSpec) write(ch *chart.Chart, dir string) ([]string, error) {
	p, err := profile.Load(r.profile)
	if err != nil {
		return nil, err
	}
	opts := values.Options{}
	if r.valuesFile != "" {
		opts.ValueFiles = []string{r.valuesFile}
	}
	vals, _, err := values.BuildFiles(p.Name, p.Values, opts)
	if err != nil {
		return nil, err
	}
	res, err := render.Render(ch, vals, render.Options{Namespace: releaseNamespace})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var objects []string
	seen := map[string]int{}
	for _, m := range res.All() {
		seen[m.Kind()+"/"+m.Name()]++
	}
	for _, m := range res.All() {
		// Of two objects of one Kind and name (the artifacts claims of the gateway and of the
		// runs), the one outside the release namespace is named with its namespace.
		name := m.Name()
		if ns := m.Object.GetNamespace(); seen[m.Kind()+"/"+name] > 1 && ns != "" && ns != releaseNamespace {
			name = ns + "." + name
		}
		path := filepath.Join(dir, scan.ObjectFile(m.Kind(), name))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			// Two objects of one Kind and name would share a file and blur the findings.
			return nil, fmt.Errorf("%s/%s: %w", m.Kind(), name, err)
		}
		_, err = f.WriteString(m.Content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		objects = append(objects, m.Kind()+"/"+name)
	}
	return objects, nil
}

// runTrivy scans every render in one trivy run (its checks are compiled once) and writes the
// JSON report. Offline: the checks embedded in the binary (no bundle download), no version
// notice, no telemetry; config scans need no vulnerability database. It runs in dir with no
// TRIVY_* environment, so no trivy.yaml, .trivyignore or variable of the caller's changes
// what is checked.
func runTrivy(trivy, dir, manifests, report string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, trivy, "config",
		"--format", "json", "--output", report,
		"--skip-check-update", "--skip-version-check", "--disable-telemetry",
		"--cache-dir", filepath.Join(dir, "trivy-cache"),
		"--k8s-version", strings.TrimPrefix(render.DefaultKubeVersion, "v"),
		"--quiet",
		manifests)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRIVY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("trivy config failed (%v):\n%s", err, stderr.String())
		}
		return fmt.Errorf("running trivy: %w (build it with e2e/scripts/build-trivy.sh)", err)
	}
	return nil
}
