package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderEnv chooses what the kind test expects: "kind" makes a missing Docker engine an
// error; "local" (or unset) lets the test skip without one, saying so.
const ProviderEnv = "E2E_PROVIDER"

// KindReportEnv names a file where TestKindProvider writes one line saying whether the kind
// provider was tested: `make test` prints it, since `go test` shows nothing of a passing package.
const KindReportEnv = "POLYAXON_DEPLOY_KIND_REPORT"

// kindReport writes the line for `make test` (and the test log).
func kindReport(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	if p := os.Getenv(KindReportEnv); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(line+"\n"), 0o644))
	}
}

// kindWanted says whether the kind provider must be tested here.
func kindWanted() (bool, error) {
	switch v := os.Getenv(ProviderEnv); v {
	case "kind":
		return true, nil
	case "", "local":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want kind or local", ProviderEnv, v)
	}
}

// TestKindProvider needs a Docker engine. With E2E_PROVIDER=kind a missing one fails the test;
// otherwise it is skipped, and the line written for `make test` says that kind was not tested.
func TestKindProvider(t *testing.T) {
	ctx := context.Background()
	wanted, err := kindWanted()
	require.NoError(t, err)
	if err := DockerAvailable(ctx); err != nil {
		if wanted {
			t.Fatalf("%s=kind, but the kind provider cannot run: %v (start the Docker engine, or unset %s)", ProviderEnv, err, ProviderEnv)
		}
		kindReport(t, "e2e: kind provider NOT tested: %v; every scenario ran on the local provider (%s=kind makes this an error)", err, ProviderEnv)
		t.Skipf("kind provider: %v", err)
	}
	p := NewKindProvider(WithKindDataDir(t.TempDir()))
	name := UniqueName("e2e-kind")
	pools := []NodePool{
		{Name: PoolCore, Count: 1, Allocatable: resources("2", "4Gi", "110", 0)},
		{Name: PoolExperiments, Count: 1, Taints: []corev1.Taint{GPUTaint}, Allocatable: resources("2", "4Gi", "110", 1)},
		{Name: PoolBuilds, Count: 1, Allocatable: resources("2", "4Gi", "110", 0)},
	}
	c, err := p.Create(ctx, name, WithNodePools(pools...), WithTimeout(10*time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Delete(context.Background(), name)) })

	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: PoolLabel})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	for _, n := range nodes.Items {
		assert.True(t, NodeReady(&n), n.Name)
		if PoolOf(&n) == PoolExperiments {
			assert.Contains(t, n.Spec.Taints, GPUTaint)
			gpu := n.Status.Capacity[GPUResource]
			assert.Equal(t, int64(1), gpu.Value())
		}
	}
	if !t.Failed() {
		kindReport(t, "e2e: kind provider tested: cluster %s created with its node pools and deleted", name)
	}
}
