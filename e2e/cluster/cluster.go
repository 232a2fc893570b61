package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract/polyaxonkeys"
)

// Provider creates and deletes clusters. Both providers (local and kind) build the
// same node-pool layout so scenarios run unchanged on either.
type Provider interface {
	// Name is "local" or "kind".
	Name() string
	// Create starts a cluster and returns once its nodes are Ready and storage is in place.
	Create(ctx context.Context, name string, opts ...CreateOption) (*Cluster, error)
	// Delete tears the cluster down; deleting a missing cluster is not an error.
	Delete(ctx context.Context, name string) error
}

// ErrNotSupported is returned by operations a provider cannot do (e.g. adding nodes to a kind cluster).
var ErrNotSupported = errors.New("not supported by this provider")

// Cluster is a running cluster and clients for it.
type Cluster struct {
	Name           string
	Provider       string
	KubeconfigPath string
	RESTConfig     *rest.Config
	Clientset      kubernetes.Interface

	addPool  func(ctx context.Context, pool NodePool) ([]string, error)
	stopBack context.CancelFunc
	// podsDir holds the directories of host programs' pods (local provider).
	podsDir string
	// hosts runs the host programs (WithHostPrograms); nil without them.
	hosts *hostRunner
	// backDone is closed when the background helpers have stopped (their processes included).
	backDone chan struct{}
}

// AddNodePool adds pool.Count nodes of the pool and waits until they are Ready.
// Node names continue after the pool's existing nodes. Returns the new node names.
func (c *Cluster) AddNodePool(ctx context.Context, pool NodePool) ([]string, error) {
	if c.addPool == nil {
		return nil, fmt.Errorf("add node pool %q to %s cluster %q: %w", pool.Name, c.Provider, c.Name, ErrNotSupported)
	}
	names, err := c.addPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := waitNodesReady(ctx, c.Clientset, names); err != nil {
		return nil, err
	}
	return names, nil
}

// WaitNodesReady waits until every node of the cluster reports Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context) error {
	return waitNodesReady(ctx, c.Clientset, nil)
}

// Close stops background helpers of this handle (the volume reclaimer, the host programs and
// their processes). It does not delete the cluster.
func (c *Cluster) Close() {
	if c.stopBack != nil {
		c.stopBack()
	}
	if c.backDone != nil {
		<-c.backDone
	}
}

// CreateOptions collects the settings of CreateOption values.
type CreateOptions struct {
	NodePools    []NodePool
	ClusterExecs []ClusterExec
	Stages       []Stage
	KubeVersion  string
	// PersistentVolumes static volumes of VolumeSize offered through the default StorageClass (local provider).
	PersistentVolumes int
	VolumeSize        resource.Quantity
	// Timeout bounds Create as a whole.
	Timeout time.Duration
	// KubeconfigPath, when set, receives a copy of the cluster's kubeconfig.
	KubeconfigPath string
	// PodCommands runs the scripts of pods annotated RunAnnotation (local provider).
	PodCommands bool
	// Programs run on this machine for the pods of their images (local provider).
	Programs []Program
	// ProgramStages prepare the cluster for programs run by another process (RunHostPrograms).
	ProgramStages []Program
	// Backends are real servers on this machine behind simulated pods (local provider).
	Backends []HostBackend
}

// CreateOption configures Create.
type CreateOption func(*CreateOptions)

// WithNodePools replaces the default node pools (DefaultNodePools). No pools means no worker nodes.
func WithNodePools(pools ...NodePool) CreateOption {
	return func(o *CreateOptions) { o.NodePools = append([]NodePool{}, pools...) }
}

// WithClusterExec maps `kubectl exec` on selected pods to local commands (local provider only;
// on kind exec runs in the real container).
func WithClusterExec(execs ...ClusterExec) CreateOption {
	return func(o *CreateOptions) { o.ClusterExecs = append(o.ClusterExecs, execs...) }
}

// WithStages adds kwok Stage documents on top of kwok's default stages (local provider only).
func WithStages(stages ...Stage) CreateOption {
	return func(o *CreateOptions) { o.Stages = append(o.Stages, stages...) }
}

// WithKubeVersion sets the Kubernetes version ("v1.37.2"). The local provider needs binaries of
// that version (see build-binaries.sh, KUBE_VERSION); kind uses the kindest/node image of that tag.
func WithKubeVersion(v string) CreateOption {
	return func(o *CreateOptions) { o.KubeVersion = v }
}

// WithPersistentVolumes sets the supply of static volumes (default 32 of 200Gi: the production
// profile's artifacts claim asks for 100Gi).
func WithPersistentVolumes(count int, size resource.Quantity) CreateOption {
	return func(o *CreateOptions) { o.PersistentVolumes, o.VolumeSize = count, size }
}

// WithTimeout bounds Create (default 5 minutes; kind 10 minutes). For the local provider it
// starts after the binaries are found (their first build takes ~15 minutes).
func WithTimeout(d time.Duration) CreateOption {
	return func(o *CreateOptions) { o.Timeout = d }
}

// WithKubeconfigPath also writes the kubeconfig to path.
func WithKubeconfigPath(path string) CreateOption {
	return func(o *CreateOptions) { o.KubeconfigPath = path }
}

func buildOptions(opts []CreateOption) CreateOptions {
	o := CreateOptions{
		NodePools:         DefaultNodePools(),
		PersistentVolumes: 32,
		VolumeSize:        resource.MustParse("200Gi"),
		Timeout:           5 * time.Minute,
	}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// newCluster loads clients from a kubeconfig file.
func newCluster(name, provider, kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: load kubeconfig %s: %w", name, kubeconfig, err)
	}
	// The certificates are read now: a config naming files makes client-go poll them for the
	// process's life, and log an error each time once the cluster's directory is gone.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig %s: %w", name, kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: clientset: %w", name, err)
	}
	return &Cluster{Name: name, Provider: provider, KubeconfigPath: kubeconfig, RESTConfig: cfg, Clientset: cs}, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// CacheDir is ${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}, as in
// build-binaries.sh and install-polyaxon.sh (one definition, polyaxonkeys', for Go).
func CacheDir() string { return polyaxonkeys.CacheDir() }
