package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/dex"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/edge"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/gatewayapi"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/trainingoperator"
	"github.com/stretchr/testify/require"
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
	traefik          = &hostBuild[gatewayapi.Build]{name: "Traefik and the Gateway API CRDs", build: gatewayapi.EnsureBuild}
	oauth2Proxy      = &hostBuild[string]{name: "oauth2-proxy", build: edge.EnsureOAuth2Proxy}
	dexBuild         = &hostBuild[string]{name: "Dex", build: dex.EnsureBuild}
	trainingOperator = &hostBuild[trainingoperator.Build]{name: "the Kubeflow training operator", build: trainingoperator.EnsureBuild}
	s3storeBuild     = &hostBuild[string]{name: "versitygw (the S3 store)", build: s3store.EnsureBuild}
)
