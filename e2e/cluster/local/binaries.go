package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// BinDirEnv overrides where the local provider finds its binaries.
const BinDirEnv = "POLYAXON_DEPLOY_BIN_DIR"

// RequiredBinaries must all be in the binary directory of the local provider.
var RequiredBinaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok", "kwokctl", "kubectl"}

// EnsureBinaries returns the directory with RequiredBinaries: $POLYAXON_DEPLOY_BIN_DIR when set,
// else what e2e/scripts/build-binaries.sh prints (it builds on first use, ~15 min on 2 cores,
// and is a no-op afterwards). Build progress goes to progress (may be nil).
func EnsureBinaries(ctx context.Context, progress io.Writer) (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, checkBinaries(d)
	}
	p, err := cluster.RunBuildScript(ctx, "build-binaries.sh", 1, progress)
	if err != nil {
		return "", err
	}
	dir := p[0]
	return dir, checkBinaries(dir)
}

func checkBinaries(dir string) error {
	var missing []string
	for _, b := range RequiredBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("binaries %s missing in %s: run e2e/scripts/build-binaries.sh", strings.Join(missing, ", "), dir)
	}
	return nil
}
