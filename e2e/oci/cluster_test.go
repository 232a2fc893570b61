package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// The control plane and the polyaxon-deploy binary, made once per run and shared.
var shared struct {
	binOnce sync.Once
	bin     string
	binErr  error

	clusterOnce sync.Once
	provider    *local.Provider
	cluster     *cluster.Cluster
	clusterErr  error
}

// deployBinary builds polyaxon-deploy from the repository.
func deployBinary(t *testing.T) string {
	t.Helper()
	shared.binOnce.Do(func() {
		root, err := cluster.RepoRoot()
		if err != nil {
			shared.binErr = err
			return
		}
		shared.bin = filepath.Join(env.dir, "bin", "polyaxon-deploy")
		cmd := exec.Command("go", "build", "-o", shared.bin, "./cmd/polyaxon-deploy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			shared.binErr = fmt.Errorf("go build ./cmd/polyaxon-deploy: %w\n%s", err, out)
		}
	})
	require.NoError(t, shared.binErr)
	return shared.bin
}

// localCluster is a local control plane (real API server, scheduler, controller-manager; kwok
// nodes in the production pools), deleted by TestMain.
func localCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	shared.clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		defer cancel()
		bin, err := local.EnsureBinaries(ctx, os.Stderr)
		if err != nil {
			shared.clusterErr = err
			return
		}
		shared.provider = local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(filepath.Join(env.dir, "kwok")))
		start := time.Now()
		shared.cluster, shared.clusterErr = shared.provider.Create(ctx, cluster.UniqueName("oci"), cluster.WithTimeout(5*time.Minute))
		if shared.clusterErr == nil {
			fmt.Fprintf(os.Stderr, "oci: local cluster ready in %s\n", time.Since(start).Round(100*time.Millisecond))
		}
	})
	require.NoError(t, shared.clusterErr, "local cluster")
	return shared.cluster
}

// sweepStaleRuns deletes what earlier runs killed before their cleanup left behind: their
// directory records the test process (owner.pid); when it is gone, its clusters go too.
func sweepStaleRuns() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "polyaxon-oci-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil || d == env.dir {
			continue
		}
		if pid, err := strconv.Atoi(string(b)); err != nil || local.ProcessAlive(pid) {
			continue
		}
		p := local.NewProvider(local.WithBinDir(os.Getenv(local.BinDirEnv)), local.WithWorkDir(filepath.Join(d, "kwok")))
		if err := p.DeleteAll(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "oci: sweep stale clusters:", err)
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// deleteCluster is called by TestMain.
func deleteCluster() error {
	if shared.cluster == nil {
		return nil
	}
	return shared.provider.Delete(context.Background(), shared.cluster.Name)
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// deploy runs polyaxon-deploy against the cluster: args[0] is the command.
func deploy(t *testing.T, c *cluster.Cluster, args ...string) result {
	t.Helper()
	full := append([]string{args[0], "--kubeconfig", c.KubeconfigPath}, args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, deployBinary(t), full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	} else {
		require.NoError(t, err)
	}
	t.Logf("$ polyaxon-deploy %s: exit %d", strings.Join(args, " "), r.code)
	return r
}
