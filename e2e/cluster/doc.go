// Package cluster provides the clusters the e2e scenarios and `make demo` run on: the Provider
// interface, the Cluster handle a provider returns, the production-shaped node pools every
// provider builds, and the small helpers providers and add-ons share (RepoRoot and
// RunBuildScript for e2e/scripts' builds, CacheDir, Exec in a pod).
//
// Every provider builds the same node pools (DefaultNodePools: `polyaxon: core`, `polyaxon:
// experiments` tainted nvidia.com/gpu=present:NoSchedule with nvidia.com/gpu allocatable,
// `polyaxon: builds`), so scenarios run unchanged on either. The providers are a package each,
// as in kind's own tree:
//
//   - local (e2e/cluster/local): a real etcd, kube-apiserver, kube-controller-manager and
//     kube-scheduler plus the kwok controller, run as local processes by `kwokctl --runtime
//     binary`; Polyaxon's own programs run on this machine for the platform's pods.
//   - kind (e2e/cluster/kind): the kind library, used when a Docker engine answers
//     (kind.DockerAvailable).
//
// This package imports neither: a caller picks its provider, or lets providers.Detect
// (e2e/cluster/providers) pick kind when a Docker engine answers, else local. An option that
// one provider alone understands (the local provider's WithClusterExec, WithHostPrograms, ...)
// is a CreateOption all the same, kept in CreateOptions.ProviderOptions; the other ignores it.
//
// The add-ons that run beside a cluster are packages of e2e/cluster/addons: gatewayapi (a
// Gateway API implementation), dex (an OpenID Connect issuer), edge (the authenticating edge's
// program) and trainingoperator (the Kubeflow training operator).
package cluster
