// Package cosigntest runs the real cosign CLI (built from the Go module proxy by
// e2e/scripts/build-cosign.sh) in tests, offline: signatures made by our code are checked by
// the program users verify them with.
package cosigntest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BinEnv, when set, is the cosign binary to run: a test binary that moves HOME (where the
// build's cache is found) pins the path before it does.
const BinEnv = "POLYAXON_DEPLOY_COSIGN"

// Build builds cosign when it is not cached and returns its path.
func Build() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "build-cosign.sh")
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building cosign (%s): %w: %s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Path is Build's path for a test. -short skips the test: the build takes minutes cold.
func Path(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("cosign is built by make test (e2e/scripts/build-cosign.sh); -short does not build it")
	}
	p, err := Build()
	require.NoError(t, err)
	return p
}

// Result is what one cosign command printed.
type Result struct {
	Output string // stdout and stderr, interleaved
	Err    error
}

// Run runs cosign with args and the extra environment (KEY=VALUE). cosign fetches Sigstore's
// public trust root over TUF unless the caller names trust material of its own; pointing
// SIGSTORE_REKOR_PUBLIC_KEY at publicKey is such a name (the transparency log is not used:
// callers pass --insecure-ignore-tlog), and TUF_ROOT is a temporary directory, so nothing
// leaves the machine or lands in the user's home.
func Run(t testing.TB, publicKey string, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Path(t), args...)
	cmd.Env = append(os.Environ(), "TUF_ROOT="+t.TempDir(), "SIGSTORE_REKOR_PUBLIC_KEY="+publicKey)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return Result{Output: string(out), Err: err}
}
