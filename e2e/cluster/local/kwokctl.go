package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kwokctl, which starts and stops the local provider's control plane, and the version it runs.

// kwokctl runs kwokctl from binDir with an environment pinned to our work dir: no KWOK_*
// variables leak in from the caller, and binDir comes first on PATH so kwokctl's own
// kubectl calls use our kubectl instead of downloading one.
func (p *Provider) kwokctl(ctx context.Context, name, binDir string, args ...string) error {
	kwokctl := filepath.Join(binDir, "kwokctl")
	if _, err := os.Stat(kwokctl); err != nil {
		if lp, lerr := exec.LookPath("kwokctl"); lerr == nil {
			kwokctl = lp
		} else {
			return fmt.Errorf("kwokctl not found in %s: %w", binDir, err)
		}
	}
	logf, err := os.OpenFile(p.logPath(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var tail bytes.Buffer
	w := io.MultiWriter(logf, &tail)
	env := []string{"KWOK_WORKDIR=" + p.workDir, "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KWOK_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	cmd := exec.CommandContext(ctx, kwokctl, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	// kwokctl forks the components into their own sessions; killing kwokctl on cancel is enough.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		out := tail.String()
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", kwokctl, strings.Join(args, " "), err, out)
	}
	return nil
}

func checkKubeVersion(ctx context.Context, binDir, want string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "kube-apiserver"), "--version").Output()
	if err != nil {
		return fmt.Errorf("kube-apiserver --version: %w", err)
	}
	got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes"))
	if strings.TrimPrefix(got, "v") != strings.TrimPrefix(want, "v") {
		return fmt.Errorf("binaries in %s are Kubernetes %s, want %s: build them with KUBE_VERSION=%s e2e/scripts/build-binaries.sh and pass WithBinDir",
			binDir, got, want, want)
	}
	return nil
}
