// Package providers picks a cluster provider for a caller that takes either: the only package
// that knows both, so that e2e/cluster knows neither.
package providers

import (
	"context"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// Detect returns the kind provider when a Docker engine answers, else the local provider made
// with opts.
func Detect(ctx context.Context, opts ...local.Option) cluster.Provider {
	if kind.DockerAvailable(ctx) == nil {
		return kind.NewProvider()
	}
	return local.NewProvider(opts...)
}
