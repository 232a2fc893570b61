package cloudnativepg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// Build is what e2e/scripts/build-cloudnativepg.sh made: the manager, and the module's
// directory in Go's module cache (config/crd/bases: the CRDs; releases/cnpg-<Version>.yaml:
// the operator's release manifest).
type Build struct {
	Manager, ModuleDir string
}

// EnsureBuild builds the manager from the Go module proxy (about a minute and a half on two
// cores with the modules downloaded; cached, reused when it reports Version) and returns it
// with the module's directory.
func EnsureBuild(ctx context.Context, progress io.Writer) (Build, error) {
	p, err := cluster.RunBuildScript(ctx, "build-cloudnativepg.sh", 2, progress)
	if err != nil {
		return Build{}, err
	}
	return Build{Manager: p[0], ModuleDir: p[1]}, nil
}

// ModuleDir is the module's directory (downloaded when missing), without building anything:
// what Install needs when the images exist already.
func ModuleDir(ctx context.Context) (string, error) {
	lines, err := runScript(ctx, io.Discard, "build-cloudnativepg.sh", "--crds")
	if err != nil {
		return "", err
	}
	return lines[len(lines)-1], nil
}

// Images are the two images of `build-kind-images.sh cloudnativepg`, in its private Docker
// engine.
type Images struct {
	// Operator is the manager's image (OperatorImage): the operator's Deployment runs it,
	// and every Postgres pod's init container copies the manager out of it.
	Operator string
	// Operand is the Postgres image tagged with its full version
	// (ghcr.io/cloudnative-pg/postgresql:15.18), a Cluster's imageName.
	Operand string
	// OperandMajor is the same image tagged with its major alone
	// (ghcr.io/cloudnative-pg/postgresql:15), as the chart names it with values/kind-demo.yaml.
	OperandMajor string
}

// All are the images' names, for kind.Images.
func (i Images) All() []string {
	var out []string
	for _, s := range []string{i.Operator, i.Operand, i.OperandMajor} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// BuildImages builds or reuses both images (build-kind-images.sh cloudnativepg: the manager's
// build included; a second run is a no-op) in the engine DOCKER_HOST names, the private
// engine by default.
func BuildImages(ctx context.Context, progress io.Writer) (Images, error) {
	lines, err := runScript(ctx, progress, "build-kind-images.sh", "cloudnativepg")
	if err != nil {
		return Images{}, err
	}
	if len(lines) < 3 {
		return Images{}, fmt.Errorf("build-kind-images.sh cloudnativepg printed %q, want 3 image names", lines)
	}
	lines = lines[len(lines)-3:]
	return Images{Operator: lines[0], Operand: lines[1], OperandMajor: lines[2]}, nil
}

// runScript runs e2e/scripts/<name> args... from the repository's root, its progress on
// progress, and returns the non-empty lines it printed on stdout.
func runScript(ctx context.Context, progress io.Writer, name string, args ...string) ([]string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	script := filepath.Join(root, "e2e", "scripts", name)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s %s printed nothing", script, strings.Join(args, " "))
	}
	return lines, nil
}
