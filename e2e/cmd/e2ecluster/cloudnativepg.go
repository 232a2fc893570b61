package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/cloudnativepg"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
)

// The demo's Postgres: the chart's StatefulSet (default), or a CloudNativePG Cluster of three
// instances on three core nodes (DEMO_POSTGRES=cloudnativepg, kind only).
const (
	postgresStatefulSet   = "statefulset"
	postgresCloudNativePG = "cloudnativepg"
)

// cloudNativePGCoreNodes holds one instance each: the chart's Cluster asks for a node per
// instance (required anti-affinity on the hostname).
const cloudNativePGCoreNodes = 3

// demoPools are kind's demo pools, the core pool grown to an instance per node for
// CloudNativePG.
func demoPools(postgres string) []cluster.NodePool {
	pools := kind.Pools()
	if postgres != postgresCloudNativePG {
		return pools
	}
	for i := range pools {
		if pools[i].Name == cluster.PoolCore {
			pools[i].Count = cloudNativePGCoreNodes
		}
	}
	return pools
}

// installCloudNativePG builds the operator's image and the instances' (build-kind-images.sh
// cloudnativepg, cached after the first time), loads them into the nodes and runs the operator
// on the control plane, so that no core node's drain takes it along.
func installCloudNativePG(ctx context.Context, p *kind.Provider, c *cluster.Cluster) error {
	start := time.Now()
	images, err := cloudnativepg.BuildImages(ctx, os.Stderr)
	if err != nil {
		return err
	}
	moduleDir, err := cloudnativepg.ModuleDir(ctx)
	if err != nil {
		return err
	}
	built := time.Since(start)
	op, err := cloudnativepg.Install(ctx, c, cloudnativepg.Options{ModuleDir: moduleDir, Images: images, Kind: p}.OnControlPlane())
	if err != nil {
		return fmt.Errorf("CloudNativePG's operator: %w", err)
	}
	fmt.Fprintf(os.Stderr, "CloudNativePG: images built in %s, loaded in %s, operator %s available in %s\n",
		built.Round(time.Second), op.Load.Round(time.Second), op.Image, (op.Apply + op.Available + op.Webhooks).Round(time.Second))
	return nil
}
