// Package gatewayapi is the Gateway API implementation of the e2e clusters: Traefik's
// Kubernetes Gateway provider, built from the Go module proxy (e2e/scripts/build-traefik.sh,
// EnsureBuild), beside the standard channel's CRDs (InstallCRDs).
//
// On the local provider, with host programs (Start), Traefik runs here as controller and data
// plane of a Gateway with an HTTPS listener. It routes to EndpointSlice addresses, kwok's pod
// IPs, through the pod network (local.PodNetworkProxy): a SOCKS5 proxy given as
// HTTP_PROXY=socks5://... that takes a connection to <pod IP>:<container port> to that pod's
// host process. On kind (StartInCluster) Traefik runs in the cluster, as a Deployment.
package gatewayapi
