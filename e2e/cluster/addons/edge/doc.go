// Package edge is the chart's authenticating edge on the local provider: oauth2-proxy, built from
// the Go module proxy (e2e/scripts/build-oauth2-proxy.sh), as the host program of the edge's
// pods.
package edge
