package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/trainingoperator"
	"github.com/stretchr/testify/require"
)

// applyKubeflowCRDs creates the operator's CRDs for plurals (e.g. "pytorchjobs") straight from
// the module cache and waits until the API server serves them.
func applyKubeflowCRDs(t *testing.T, c *testCluster, crdDir string, plurals ...string) {
	t.Helper()
	require.NoError(t, trainingoperator.ApplyKubeflowCRDs(ctxT(t, 2*time.Minute), c.Cluster, crdDir, plurals...))
}

// startTrainingOperator runs the operator's manager as a local process against the cluster
// (trainingoperator.Operator, which plays the kubelet's part for its webhook certificate),
// watching namespace (the runs'), with the controllers of schemes (default: only
// pytorchjob). The process is killed when the test ends; its log is printed if the test
// failed.
func startTrainingOperator(t *testing.T, c *testCluster, bin, namespace string, schemes ...string) {
	t.Helper()
	if len(schemes) == 0 {
		schemes = []string{"pytorchjob"}
	}
	op := trainingoperator.Operator{Bin: bin, Namespace: namespace, Schemes: schemes, Dir: t.TempDir(), Env: subprocessEnv()}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := op.Run(ctx, c.Cluster)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("training operator log (last 60 lines):\n%s", lastLines(readFile(op.LogPath()), 60))
		}
	})
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readFile(path string) string {
	b, _ := os.ReadFile(filepath.Clean(path))
	return string(b)
}
