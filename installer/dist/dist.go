// Package dist makes the files of a release of polyaxon-deploy (make release): the binary for
// each platform, built with the version stamped in (the commit and its time come with Go's own
// build information), a CycloneDX SBOM of each binary read from that binary, the chart's
// archive, checksums.txt over them all and a cosign signature of every file; and publishes the
// chart to an OCI registry with its provenance, its cosign signature and Artifact Hub's
// repository metadata.
package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartpkg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/sign"
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
	// Chart, when set, is packaged into Dest (with a provenance file when Chart.Sign).
	Chart *chartpkg.Options
	// Key signs every file, checksums.txt included (cosign sign-blob's format). A release
	// without one is refused unless Unsigned says it is a trial build.
	Key      *sign.Key
	Unsigned bool
}

// Result lists what was written, relative to Dest.
type Result struct {
	Binaries, SBOMs []string
	// Chart and Provenance are the chart's archive and its .prov ("" when not made).
	Chart, Provenance string
	Checksums         string
	// Signatures are the .sig files, one per file above.
	Signatures []string
}

// Build builds every target, writes each binary's SBOM and the checksums.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Key == nil && !o.Unsigned {
		return nil, fmt.Errorf("a release is signed: give the key (fix: make release COSIGN_KEY=cosign.key, the password in %s; or UNSIGNED=1 for a trial build)", sign.PasswordEnv)
	}
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
	files := append(append([]string{}, res.Binaries...), res.SBOMs...)
	if o.Chart != nil {
		c := *o.Chart
		c.Dest = o.Dest
		pkg, err := chartpkg.Package(c)
		if err != nil {
			return nil, err
		}
		res.Chart = filepath.Base(pkg.Archive)
		files = append(files, res.Chart)
		if pkg.Provenance != "" {
			res.Provenance = filepath.Base(pkg.Provenance)
			files = append(files, res.Provenance)
		}
	}
	res.Checksums = ChecksumsFile
	if err := WriteChecksums(o.Dest, files); err != nil {
		return nil, err
	}
	if o.Key != nil {
		for _, f := range append(files, res.Checksums) {
			sig, err := o.Key.SignFile(filepath.Join(o.Dest, f))
			if err != nil {
				return nil, err
			}
			res.Signatures = append(res.Signatures, filepath.Base(sig))
		}
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
