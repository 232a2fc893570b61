package main

import (
	"context"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// capabilitiesTimeout bounds reading the cluster's version and discovery before a render.
const capabilitiesTimeout = 30 * time.Second

// clusterReleaseOptions are releaseOptions rendered for the cluster itself: its server version
// and discovery's version set, read as Helm's install and upgrade read them, so check, plan,
// install and upgrade judge exactly the objects Helm will apply (the run admission policies
// exist only where the server serves them). Without a reachable cluster the render stays
// offline (render.DefaultKubeVersion); the kube-api check then reports the cluster.
func clusterReleaseOptions(c *cli.Context) render.Options {
	opts := releaseOptions(c)
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		debugf(c, "render: no cluster (%v): rendering offline for Kubernetes %s", err, render.DefaultKubeVersion)
		return opts
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
		return opts
	}
	debugf(c, "render: Kubernetes %s, %d API versions from discovery", caps.KubeVersion.Version, len(caps.APIVersions))
	opts.Cluster = caps
	return opts
}
