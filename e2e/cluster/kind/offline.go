package kind

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// The offline kind setup (docs/kind-offline.md): e2e/scripts/build-kind-images.sh builds the
// node image and every image it preloads from Debian's packages and the Go module proxy, in a
// private Docker engine that answers on its own socket, never the default one.
const (
	// OfflineDockerHost is the private engine's address (DOCKER_HOST).
	OfflineDockerHost = "unix:///run/polyaxon-kind/docker.sock"
	// kindOfflineNodeRepo is the node image's repository; its tag is the Kubernetes version.
	kindOfflineNodeRepo = "polyaxon-deploy/kind-node"
	// OfflineKubeVersion is the Kubernetes version the script builds by default (its
	// KUBE_VERSION, as build-binaries.sh's).
	OfflineKubeVersion = "v1.37.2"
	// OfflineSnapshotsDir is the tmpfs the script mounts beside the engine's socket for the
	// nodes' unpacked images (WithSnapshotsIn).
	OfflineSnapshotsDir = "/run/polyaxon-kind/snapshots"
)

// NewOfflineProvider is the kind provider of the offline setup: on the engine DOCKER_HOST
// names (the private one, OfflineDockerHost, is the callers' default), nodes of the node
// image built here, their unpacked images on the script's tmpfs when it is mounted. It says
// what to run when the engine or the node image is missing.
func NewOfflineProvider(ctx context.Context, opts ...Option) (*Provider, error) {
	if err := DockerAvailable(ctx); err != nil {
		return nil, fmt.Errorf("kind: %w at DOCKER_HOST=%s (e2e/scripts/build-kind-images.sh docker starts the private engine)", err, os.Getenv("DOCKER_HOST"))
	}
	image := OfflineNodeImage(OfflineKubeVersion)
	if !DockerImagePresent(ctx, image) {
		return nil, fmt.Errorf("kind: no node image %s in the engine at %s: run `make kind-images`", image, os.Getenv("DOCKER_HOST"))
	}
	base := []Option{WithNodeImage(image)}
	if st, err := os.Stat(OfflineSnapshotsDir); err == nil && st.IsDir() {
		base = append(base, WithSnapshotsIn(OfflineSnapshotsDir))
	}
	return NewProvider(append(base, opts...)...), nil
}

// Pools are the production pools with one node each: core, a tainted GPU experiments node
// and builds, beside the control plane (whose own pods take most of a small host's CPU, so it
// runs no pool's). Every kind node holds its own copy of the images it runs.
func Pools() []cluster.NodePool {
	pools := cluster.DefaultNodePools()
	for i := range pools {
		pools[i].Count = 1
	}
	return pools
}

// OfflineNodeImage names the node image built here for a Kubernetes version (v1.37.2).
func OfflineNodeImage(kubeVersion string) string { return kindOfflineNodeRepo + ":" + kubeVersion }

// kubeletCgroupV1Patch lets the kubelet start on a cgroup v1 node: since Kubernetes 1.35 it
// refuses to by default (KEP-5573, failCgroupV1), and this machine's Docker runs on cgroup v1.
const kubeletCgroupV1Patch = "kind: KubeletConfiguration\nfailCgroupV1: false\n"

// DockerImagePresent says whether the Docker engine (DOCKER_HOST) has image.
func DockerImagePresent(ctx context.Context, image string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", image).Run() == nil
}

// OfflineConfig is a kind cluster of one control plane and the given number of workers,
// whose kubelets accept cgroup v1.
func OfflineConfig(workers int) *kindv1alpha4.Cluster {
	cfg := &kindv1alpha4.Cluster{
		TypeMeta:             kindv1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Nodes:                []kindv1alpha4.Node{{Role: kindv1alpha4.ControlPlaneRole}},
		KubeadmConfigPatches: []string{kubeletCgroupV1Patch},
	}
	for i := 0; i < workers; i++ {
		cfg.Nodes = append(cfg.Nodes, kindv1alpha4.Node{Role: kindv1alpha4.WorkerRole})
	}
	return cfg
}

// LoadDockerImage copies an image from the Docker engine (DOCKER_HOST) into the containerd of
// every node of a kind cluster, as `kind load docker-image` does: nothing is pulled.
func LoadDockerImage(ctx context.Context, p *kindcluster.Provider, clusterName, image string) error {
	nodes, err := p.ListInternalNodes(clusterName)
	if err != nil {
		return fmt.Errorf("load %s: list nodes of %q: %w", image, clusterName, err)
	}
	for _, n := range nodes {
		cmd := exec.CommandContext(ctx, "docker", "save", image)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("load %s: docker save: %w", image, err)
		}
		loadErr := nodeutils.LoadImageArchive(n, out)
		_, _ = io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("load %s: docker save: %w", image, err)
		}
		if loadErr != nil {
			return fmt.Errorf("load %s into node %s: %w", image, n.String(), loadErr)
		}
	}
	return nil
}
