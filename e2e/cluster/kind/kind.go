package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// Provider creates clusters with the kind library (one Docker container per node).
// The local provider's own options (WithClusterExec, WithStages, host programs) do not apply:
// kind runs real kubelets and containers.
type Provider struct {
	p       *kindcluster.Provider
	dataDir string
	// nodeImage, when set, is every node's image (WithNodeImage).
	nodeImage string
	// mounts are added to every node (WithNodeMounts).
	mounts []kindv1alpha4.Mount
	// snapshotsDir, when set, holds each node's unpacked images (WithSnapshotsIn).
	snapshotsDir string
}

// Option configures NewProvider.
type Option func(*Provider)

// WithDataDir sets where kubeconfigs are written (default: <CacheDir>/kind).
func WithDataDir(dir string) Option { return func(k *Provider) { k.dataDir = dir } }

// WithNodeImage creates every node from image (the offline one: OfflineNodeImage).
// Without it, Create uses the offline node image of the Kubernetes version when the engine has
// it, else kind's published one (which the engine pulls).
func WithNodeImage(image string) Option { return func(k *Provider) { k.nodeImage = image } }

// WithNodeMounts mounts host paths into every node (kind's extraMounts): one host
// directory at the same path in every node is a volume all nodes share.
func WithNodeMounts(mounts ...kindv1alpha4.Mount) Option {
	return func(k *Provider) { k.mounts = append(k.mounts, mounts...) }
}

// WithSnapshotsIn keeps each node's unpacked images (containerd's overlayfs snapshots) in a
// directory of its own under dir/<cluster>, mounted into the node, rather than in the node's
// /var volume. On a tmpfs this spares the disk two things: writing gigabytes at every image
// load, and Docker's removal of the node's volume, file by file, when the cluster is deleted
// (18 minutes for four nodes on a loaded machine). The node image's preloaded images are kept
// packed, so the mount hides nothing. LoadImages writes its archives there too.
func WithSnapshotsIn(dir string) Option {
	return func(k *Provider) { k.snapshotsDir = dir }
}

// kindSnapshotsPath is where a node's containerd keeps its overlayfs snapshots.
const kindSnapshotsPath = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"

// NewProvider returns the kind provider (Docker node runtime).
func NewProvider(opts ...Option) *Provider {
	k := &Provider{p: kindcluster.NewProvider(kindcluster.ProviderWithDocker()), dataDir: filepath.Join(cluster.CacheDir(), "kind")}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Name implements Provider.
func (k *Provider) Name() string { return "kind" }

func (k *Provider) kubeconfigPath(name string) string {
	return filepath.Join(k.dataDir, name+".kubeconfig")
}

// Config renders the node pools as a kind cluster: one control plane plus one worker per
// pool node, labelled through kind's node labels, tainted through a kubeadm JoinConfiguration
// patch (taints must be there when the kubelet registers, before anything schedules). Every
// kubelet accepts a cgroup v1 host (kubeletCgroupV1Patch); on cgroup v2 the setting is moot.
func Config(pools []cluster.NodePool) (*kindv1alpha4.Cluster, error) {
	cfg := &kindv1alpha4.Cluster{
		TypeMeta:             kindv1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Nodes:                []kindv1alpha4.Node{{Role: kindv1alpha4.ControlPlaneRole}},
		KubeadmConfigPatches: []string{kubeletCgroupV1Patch},
	}
	for _, pool := range pools {
		if pool.Name == "" || pool.Count < 0 {
			return nil, fmt.Errorf("kind config: node pool %q: name required and count >= 0", pool.Name)
		}
		var patches []string
		if len(pool.Taints) > 0 {
			patch, err := joinTaintsPatch(pool.Taints)
			if err != nil {
				return nil, fmt.Errorf("kind config: node pool %q: %w", pool.Name, err)
			}
			patches = append(patches, patch)
		}
		for i := 0; i < pool.Count; i++ {
			cfg.Nodes = append(cfg.Nodes, kindv1alpha4.Node{
				Role:                 kindv1alpha4.WorkerRole,
				Labels:               pool.NodeLabels(),
				KubeadmConfigPatches: patches,
			})
		}
	}
	return cfg, nil
}

func joinTaintsPatch(taints []corev1.Taint) (string, error) {
	type taint struct {
		Key    string `json:"key"`
		Value  string `json:"value,omitempty"`
		Effect string `json:"effect"`
	}
	var ts []taint
	for _, t := range taints {
		ts = append(ts, taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	b, err := yaml.Marshal(map[string]any{
		"kind":             "JoinConfiguration",
		"nodeRegistration": map[string]any{"taints": ts},
	})
	return string(b), err
}

// Create implements Provider.
func (k *Provider) Create(ctx context.Context, name string, opts ...cluster.CreateOption) (*cluster.Cluster, error) {
	o := cluster.BuildOptions(opts)
	if o.Timeout == 5*time.Minute {
		o.Timeout = 10 * time.Minute
	}
	if err := DockerAvailable(ctx); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	cfg, err := Config(o.NodePools)
	if err != nil {
		return nil, err
	}
	if k.snapshotsDir != "" {
		k.sweepSnapshots(time.Now())
	}
	for i := range cfg.Nodes {
		cfg.Nodes[i].ExtraMounts = append(cfg.Nodes[i].ExtraMounts, k.mounts...)
		if k.snapshotsDir != "" {
			dir := filepath.Join(k.snapshotsDir, name, strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("kind cluster %q: %w", name, err)
			}
			cfg.Nodes[i].ExtraMounts = append(cfg.Nodes[i].ExtraMounts, kindv1alpha4.Mount{HostPath: dir, ContainerPath: kindSnapshotsPath})
		}
	}
	if err := os.MkdirAll(k.dataDir, 0o755); err != nil {
		return nil, err
	}
	kc := k.kubeconfigPath(name)
	copts := []kindcluster.CreateOption{
		kindcluster.CreateWithV1Alpha4Config(cfg),
		kindcluster.CreateWithKubeconfigPath(kc),
		kindcluster.CreateWithWaitForReady(o.Timeout),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	}
	if image := k.image(ctx, o.KubeVersion); image != "" {
		copts = append(copts, kindcluster.CreateWithNodeImage(image))
	}
	// The kind library has no context; it stops on its own wait timeout.
	if err := k.p.Create(name, copts...); err != nil {
		return nil, fmt.Errorf("kind cluster %q: create: %w", name, err)
	}
	c, err := cluster.FromKubeconfig(name, k.Name(), kc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := advertiseExtendedResources(ctx, c, o.NodePools); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	if err := cluster.WaitNodesReady(ctx, c.Clientset, nil); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	if err := restartNetworkAgents(ctx, c.Clientset); err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	if o.KubeconfigPath != "" {
		if err := cluster.CopyFile(kc, o.KubeconfigPath); err != nil {
			return nil, fmt.Errorf("kind cluster %q: copy kubeconfig: %w", name, err)
		}
	}
	return c, nil
}

// restartNetworkAgents restarts kube-router once every node is Ready. An agent that started
// before the other nodes had their pod ranges keeps a list of the cluster's pod ranges without
// them, and masquerades its pods' traffic to theirs as the node's address: a NetworkPolicy that
// admits those pods (the CloudNativePG operator on the control plane calling its instances)
// then refuses them.
func restartNetworkAgents(ctx context.Context, cs kubernetes.Interface) error {
	const selector = "k8s-app=kube-router"
	pods := cs.CoreV1().Pods("kube-system")
	old, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("listing kube-router's pods: %w", err)
	}
	stale := map[string]bool{}
	for _, p := range old.Items {
		stale[p.Name] = true
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("restarting kube-router's pod %s: %w", p.Name, err)
		}
	}
	var notReady []string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil //nolint:nilerr // retried until ctx ends
		}
		notReady = notReady[:0]
		fresh := 0
		for _, p := range list.Items {
			if stale[p.Name] {
				notReady = append(notReady, p.Name+" (stopping)")
				continue
			}
			fresh++
			if !podutils.IsPodReady(&p) {
				notReady = append(notReady, p.Name)
			}
		}
		return fresh == len(old.Items) && len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("kube-router after its restart: not ready: %s: %w", strings.Join(notReady, ", "), err)
	}
	return nil
}

// image is the node image: WithNodeImage's, else the offline one of the version (the
// default version when none is asked) when the engine has it, else kind's published one of the
// version ("" leaves kind's default).
func (k *Provider) image(ctx context.Context, kubeVersion string) string {
	if k.nodeImage != "" {
		return k.nodeImage
	}
	v := kubeVersion
	if v == "" {
		v = OfflineKubeVersion
	}
	if DockerImagePresent(ctx, OfflineNodeImage(v)) {
		return OfflineNodeImage(v)
	}
	if kubeVersion != "" {
		return "kindest/node:" + kubeVersion
	}
	return ""
}

// advertiseExtendedResources patches node status with the pools' extended resources
// (nvidia.com/gpu): kind nodes have no device plugin, and an extended resource is
// advertised by adding it to the node's status capacity.
func advertiseExtendedResources(ctx context.Context, c *cluster.Cluster, pools []cluster.NodePool) error {
	for _, pool := range pools {
		ext := map[string]string{}
		for r, q := range pool.Allocatable {
			if strings.Contains(string(r), "/") {
				ext[string(r)] = q.String()
			}
		}
		if len(ext) == 0 {
			continue
		}
		nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{cluster.PoolLabel: pool.Name}).String(),
		})
		if err != nil {
			return fmt.Errorf("node pool %q: list nodes: %w", pool.Name, err)
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": ext}})
		for _, n := range nodes.Items {
			if _, err := c.Clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("node %s: advertise %v: %w", n.Name, ext, err)
			}
		}
	}
	return nil
}

// Get connects to an existing kind cluster created by this provider.
func (k *Provider) Get(_ context.Context, name string) (*cluster.Cluster, error) {
	return cluster.FromKubeconfig(name, k.Name(), k.kubeconfigPath(name))
}

// Delete implements Provider.
func (k *Provider) Delete(_ context.Context, name string) error {
	if err := k.p.Delete(name, k.kubeconfigPath(name)); err != nil {
		return fmt.Errorf("delete kind cluster %q: %w", name, err)
	}
	_ = os.Remove(k.kubeconfigPath(name))
	if k.snapshotsDir != "" {
		if err := os.RemoveAll(filepath.Join(k.snapshotsDir, name)); err != nil {
			return fmt.Errorf("delete kind cluster %q: its nodes' snapshots: %w", name, err)
		}
	}
	return nil
}

// snapshotsGrace is how old a snapshot directory with no cluster must be to be swept: a
// younger one may be a cluster that another process is creating (its directory comes first).
const snapshotsGrace = 30 * time.Minute

// sweepSnapshots removes what a killed test left in snapshotsDir: the directories of clusters
// that no longer exist and image archives no load is using, once older than snapshotsGrace.
// On a tmpfs they hold memory (a killed run of the kind scenario leaves gigabytes) until the
// next boot. Nothing is removed when the clusters cannot be listed.
func (k *Provider) sweepSnapshots(now time.Time) {
	live, err := k.p.List()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(k.snapshotsDir)
	if err != nil {
		return
	}
	for _, name := range staleSnapshots(entries, live, now) {
		_ = os.RemoveAll(filepath.Join(k.snapshotsDir, name))
	}
}

// staleSnapshots are the entries of a snapshots directory to sweep: directories older than
// snapshotsGrace whose name is no live cluster's.
func staleSnapshots(entries []os.DirEntry, live []string, now time.Time) []string {
	var stale []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || slices.Contains(live, e.Name()) || now.Sub(info.ModTime()) < snapshotsGrace {
			continue
		}
		stale = append(stale, e.Name())
	}
	return stale
}

// DockerAvailable returns nil when a Docker engine answers `docker info`, else why not.
func DockerAvailable(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("no docker CLI on PATH")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i > 0 {
			msg = msg[:i]
		}
		return fmt.Errorf("no Docker engine answers (docker info: %s)", msg)
	}
	return nil
}
