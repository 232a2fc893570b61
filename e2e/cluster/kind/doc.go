// Package kind is the kind provider: clusters of real kubelets and containers, one Docker
// container per node, created with the kind library (kind.go); the offline setup of
// docs/kind-offline.md, whose node image and images are built here (offline.go); and the
// loading of a chart's images into the nodes of their pools (load.go).
package kind
