// Command mutate is `make mutate`: it runs the gremlins mutation tester over the fast packages,
// one package at a time, and prints each package's efficacy (killed / (killed + lived)), the
// survivors that have neither a test nor an entry in the survivors file, and the accepted ones
// with their reason. Exit 1 when a gated package is under its bar (or gremlins broke).
//
//	go run ./e2e/cmd/mutate -gremlins $(e2e/scripts/build-gremlins.sh) [-survivors FILE] [PKG...]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/mutation"
)

// The fast packages: pure logic whose tests run in seconds.
var defaultPackages = []string{"installer/preflight", "installer/check", "installer/plan", "installer/values", "installer/profile", "installer/render"}

func main() {
	gremlins := flag.String("gremlins", "", "path of the gremlins binary (make mutate builds it: e2e/scripts/build-gremlins.sh)")
	survivorsFile := flag.String("survivors", "installer/mutation-survivors.txt", "the surviving mutants judged acceptable, each with its reason")
	gated := flag.String("gate", "installer/preflight,installer/check,installer/plan", "packages that must reach -min efficacy")
	minEfficacy := flag.Float64("min", 80, "efficacy (percent) the gated packages must reach")
	workers := flag.Int("workers", 1, "mutants tested at once (each builds and runs the package's tests)")
	coefficient := flag.Int("timeout-coefficient", 10, "a mutant's tests time out after this many times the first test run (a loaded machine needs room)")
	keep := flag.String("keep", "", "keep gremlins' JSON reports in this directory")
	// Helper packages for tests (plantest, like net/http/httptest) are test code: their
	// mutants say how the tests are written, not whether they guard the product.
	exclude := flag.String("exclude", `test/[^/]+\.go$`, "regexp of files not to mutate (gremlins --exclude-files)")
	flag.Parse()
	if *gremlins == "" {
		fmt.Fprintln(os.Stderr, "usage: mutate -gremlins PATH [-survivors FILE] [-gate PKG,...] [-min PERCENT] [PKG...]")
		os.Exit(2)
	}
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = defaultPackages
	}
	gate := mutation.Gate{}
	for _, p := range strings.Split(*gated, ",") {
		if p = strings.TrimSpace(p); p != "" {
			gate[p] = *minEfficacy
		}
	}
	ok, err := run(*gremlins, *survivorsFile, *keep, *exclude, pkgs, gate, *workers, *coefficient)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(gremlins, survivorsFile, keep, exclude string, pkgs []string, gate mutation.Gate, workers, coefficient int) (bool, error) {
	f, err := os.Open(survivorsFile)
	if err != nil {
		return false, err
	}
	survivors, err := mutation.ReadSurvivors(f, survivorsFile)
	f.Close()
	if err != nil {
		return false, err
	}
	dir := keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mutate-"); err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	var results []mutation.Package
	for _, pkg := range pkgs {
		pkg = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(pkg)), "./")
		out := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".json")
		start := time.Now()
		fmt.Fprintf(os.Stderr, "mutate: %s ...\n", pkg)
		args := []string{"unleash", "--silent", "--workers", strconv.Itoa(workers),
			"--timeout-coefficient", strconv.Itoa(coefficient), "-o", out}
		if exclude != "" {
			args = append(args, "--exclude-files", exclude)
		}
		cmd := exec.Command(gremlins, append(args, "./"+pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// gremlins times each mutant against its first, coverage run: a cached result there would
		// make the timeout a fraction of a real run and report survivors as timed out. Vet is off:
		// a mutant is judged by the tests, and vet adds a second to each of hundreds of runs. No
		// cgo: the Go linker alone links a test binary in three quarters of the time.
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -count=1 -vet=off"), "CGO_ENABLED=0")
		if err := cmd.Run(); err != nil {
			return false, fmt.Errorf("gremlins on %s: %w", pkg, err)
		}
		rf, err := os.Open(out)
		if err != nil {
			return false, err
		}
		p, err := mutation.ReadReport(rf, ".", pkg)
		rf.Close()
		if err != nil {
			return false, err
		}
		fmt.Fprintf(os.Stderr, "mutate: %s: %.2f%% efficacy, %d mutants, in %s\n", pkg, p.Efficacy(), len(p.Mutants), time.Since(start).Round(time.Second))
		results = append(results, p)
	}
	s := mutation.Summarize(results, survivors, gate)
	if err := s.Write(os.Stdout, gate); err != nil {
		return false, err
	}
	return s.OK(), nil
}
