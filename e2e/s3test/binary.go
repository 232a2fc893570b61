package s3test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// BinaryEnv names a versitygw binary to use instead of the one e2e/scripts/build-s3store.sh
// builds.
const BinaryEnv = "S3TEST_VERSITYGW"

// BuildHint is said whenever the versitygw binary cannot be found or built.
const BuildHint = "run `make s3store` (e2e/scripts/build-s3store.sh builds versitygw from the Go module proxy)"

var (
	binaryMu   sync.Mutex
	binaryPath string // the build script's answer, once it gave one
)

// Binary returns the path of the versitygw binary: $S3TEST_VERSITYGW when set, else the path
// e2e/scripts/build-s3store.sh prints (it builds the binary the first time, a few minutes cold,
// and is a no-op afterwards). The script runs once per process.
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w; unset it or %s", BinaryEnv, p, err, BuildHint)
		}
		return p, nil
	}
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if binaryPath != "" {
		return binaryPath, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("finding e2e/scripts/build-s3store.sh: %w; set %s or %s", err, BinaryEnv, BuildHint)
	}
	script := filepath.Join(root, "e2e", "scripts", "build-s3store.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s\n%s", script, err, strings.TrimSpace(stderr.String()), BuildHint)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if err := executable(p); err != nil {
		return "", fmt.Errorf("%s printed %q: %w; %s", script, stdout.String(), err, BuildHint)
	}
	binaryPath = p
	return p, nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// repoRoot is the repository root: from this source file's location, or, in a test binary
// built with -trimpath, from the go.mod that `go env GOMOD` finds for the working directory.
func repoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the repository's module (go env GOMOD is %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}
