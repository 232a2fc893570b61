package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// hostBuild is a program built from the Go module proxy by one of e2e/scripts/build-*.sh
// (cached outside the repository): built once per test binary, by the first test that needs
// it, so that only the tests that run it pay for a cold build.
type hostBuild[T any] struct {
	name  string
	build func(context.Context, io.Writer) (T, error)

	once sync.Once
	v    T
	err  error
}

func (b *hostBuild[T]) get(t *testing.T) T {
	t.Helper()
	b.once.Do(func() {
		start := time.Now()
		b.v, b.err = b.build(context.Background(), os.Stderr)
		fmt.Fprintf(os.Stderr, "e2e: %s ready in %s\n", b.name, time.Since(start).Round(100*time.Millisecond))
	})
	require.NoError(t, b.err)
	return b.v
}

var (
	traefik          = &hostBuild[cluster.GatewayBuild]{name: "Traefik and the Gateway API CRDs", build: cluster.EnsureGatewayBuild}
	oauth2Proxy      = &hostBuild[string]{name: "oauth2-proxy", build: cluster.EnsureOAuth2Proxy}
	dex              = &hostBuild[string]{name: "Dex", build: cluster.EnsureDex}
	trainingOperator = &hostBuild[cluster.TrainingOperatorBuild]{name: "the Kubeflow training operator", build: cluster.EnsureTrainingOperator}
)
