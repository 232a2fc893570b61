// Package cloudnativepg installs the CloudNativePG operator (v1.28.0) on a kind cluster of the
// offline setup (docs/kind-offline.md), with everything built on this machine:
//
//   - EnsureBuild runs e2e/scripts/build-cloudnativepg.sh: the operator's manager, built from
//     the Go module proxy, and the module's directory (its CRDs and release manifest);
//     ModuleDir finds the directory alone, without building.
//   - BuildImages runs `e2e/scripts/build-kind-images.sh cloudnativepg`: the operator image
//     (the manager alone at /manager) and the operand image (Debian's PostgreSQL, `postgres`
//     as uid/gid 26), both under the published names and labelled as local stand-ins.
//   - Install loads both images into the nodes (kind.Provider.LoadImages), applies the
//     module's CRDs and the release manifest's other objects (server-side apply) with the
//     operator's image set to the local one and never pulled, and returns once the operator's
//     Deployment is Available and its webhooks answer a server-side dry run.
//   - GetCluster and WaitCluster read a Cluster's status (its phase, current and target
//     primary, instances) for tests that create one.
//
// The add-on does not create a Cluster: that is the caller's (the chart's, with
// postgresql.mode=cloudnativepg, or a test's own). e2e/kind_cloudnativepg_test.go
// (E2E_CLOUDNATIVEPG=1) shows it end to end: three instances, then a failover.
package cloudnativepg
