package main

import (
	"context"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// capabilitiesTimeout bounds reading the cluster's version and discovery before a render.
const capabilitiesTimeout = 30 * time.Second

// clusterCapabilities reads the cluster's capabilities for a render (the actions call it once
// the inputs are loaded): its server version and discovery's version set, read as Helm's
// install and upgrade read them, so check, plan, install and upgrade judge exactly the objects
// Helm will apply (the run admission policies exist only where the server serves them).
// Without a reachable cluster it is nil and the render stays offline
// (render.DefaultKubeVersion); the kube-api check then reports the cluster.
func clusterCapabilities(c *cli.Context) func() *render.Cluster {
	return func() *render.Cluster { return readCapabilities(c) }
}

func readCapabilities(c *cli.Context) *render.Cluster {
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		debugf(c, "render: no cluster (%v): rendering offline for Kubernetes %s", err, render.DefaultKubeVersion)
		return nil
	}
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, capabilitiesTimeout)
	defer cancel()
	caps, err := render.ClusterCapabilities(ctx, cs.Discovery())
	if err != nil {
		debugf(c, "render: cluster capabilities unavailable (%v): rendering offline for Kubernetes %s", err, render.DefaultKubeVersion)
		return nil
	}
	debugf(c, "render: Kubernetes %s, %d API versions from discovery", caps.KubeVersion.Version, len(caps.APIVersions))
	return caps
}
