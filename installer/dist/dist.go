// Package dist makes the files of a release of polyaxon-deploy (make release): the binary for
// each platform, built with the version stamped in (the commit and its time come with Go's own
// build information), a CycloneDX SBOM of each binary read from that binary, and
// checksums.txt over them all.
package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Target is a platform a binary is built for.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "/" + t.Arch }

// DefaultTargets are the platforms of a release.
var DefaultTargets = []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// ParseTargets reads "os/arch,os/arch".
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	for _, part := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(part), "/")
		if !ok || goos == "" || arch == "" {
			return nil, fmt.Errorf("target %q: want os/arch, e.g. linux/amd64", part)
		}
		out = append(out, Target{goos, arch})
	}
	return out, nil
}

// Options say what to build.
type Options struct {
	// Module is the module's root directory (go.mod), Package the main package in it.
	Module, Package string
	// Name is the binary's name; Version is stamped into main.version.
	Name, Version string
	Targets       []Target
	// Dest is the directory the files are written to; it must be empty or absent.
	Dest string
}

// Result lists what was written, relative to Dest.
type Result struct {
	Binaries, SBOMs []string
	Checksums       string
}

// Build builds every target, writes each binary's SBOM and the checksums.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := emptyDest(o.Dest); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, t := range o.Targets {
		name := fmt.Sprintf("%s_%s_%s_%s", o.Name, strings.TrimPrefix(o.Version, "v"), t.OS, t.Arch)
		if err := build(ctx, o, t, filepath.Join(o.Dest, name)); err != nil {
			return nil, err
		}
		sbom := name + ".cdx.json"
		if err := WriteSBOM(filepath.Join(o.Dest, name), filepath.Join(o.Dest, sbom)); err != nil {
			return nil, err
		}
		res.Binaries, res.SBOMs = append(res.Binaries, name), append(res.SBOMs, sbom)
	}
	res.Checksums = ChecksumsFile
	files := append(append([]string{}, res.Binaries...), res.SBOMs...)
	if err := WriteChecksums(o.Dest, files); err != nil {
		return nil, err
	}
	return res, nil
}

// emptyDest makes dest, refusing one that holds files: a release never mixes with another.
func emptyDest(dest string) error {
	entries, err := os.ReadDir(dest)
	switch {
	case os.IsNotExist(err):
		return os.MkdirAll(dest, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: a release is written to a new directory (remove it, or give another --dest)", dest)
	}
	return nil
}

// build runs the Go toolchain for one target: static, without the builder's paths, the
// version stamped in. Go adds the commit, its time and whether the tree was modified
// (vcs.revision, vcs.time, vcs.modified) itself when the module is a git checkout.
func build(ctx context.Context, o Options, t Target, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto",
		"-ldflags", "-s -w -X main.version="+o.Version, "-o", abs, o.Package)
	cmd.Dir = o.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for %s: %w\n%s", o.Package, t, err, b)
	}
	return nil
}
