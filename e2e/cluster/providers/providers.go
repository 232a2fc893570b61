// Package providers picks a cluster provider for a caller that takes either: the only package
// that knows both, so that e2e/cluster knows neither.
package providers

import (
	"context"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
)

// Detect returns the kind provider when a Docker engine answers, else the local provider.
func Detect(ctx context.Context, local ...cluster.LocalOption) cluster.Provider {
	if kind.DockerAvailable(ctx) == nil {
		return kind.NewProvider()
	}
	return cluster.NewLocalProvider(local...)
}
