package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

	// addPool creates a pool's nodes (SetNodePoolAdder); nil when the provider cannot.
	addPool func(ctx context.Context, pool NodePool) ([]string, error)
	// stopBack stops the provider's background helpers of this handle (SetBackground).
	stopBack context.CancelFunc
	// backDone is closed when the background helpers have stopped (their processes included).
	backDone <-chan struct{}

	mu sync.Mutex
	// values are what providers keep with the handle (SetValue).
	values map[any]any
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
	if err := WaitNodesReady(ctx, c.Clientset, names); err != nil {
		return nil, err
	}
	return names, nil
}

// WaitNodesReady waits until every node of the cluster reports Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context) error {
	return WaitNodesReady(ctx, c.Clientset, nil)
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

// SetNodePoolAdder is for providers: AddNodePool creates a pool's nodes with add, then waits
// until they are Ready. Without it AddNodePool returns ErrNotSupported.
func (c *Cluster) SetNodePoolAdder(add func(ctx context.Context, pool NodePool) ([]string, error)) {
	c.addPool = add
}

// SetBackground is for providers: Close calls stop, then waits until done is closed (when not
// nil). The background helpers stop there: the volume reclaimer, the host programs and their
// processes of the local provider.
func (c *Cluster) SetBackground(stop context.CancelFunc, done <-chan struct{}) {
	c.stopBack, c.backDone = stop, done
}

// BackgroundDone is closed when the background helpers of SetBackground have stopped; nil when
// the handle has none.
func (c *Cluster) BackgroundDone() <-chan struct{} { return c.backDone }

// SetValue is for providers: it keeps value with the handle under key, a type of the
// provider's own, as context.WithValue does (the local provider's pods directory and host
// programs).
func (c *Cluster) SetValue(key, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		c.values = map[any]any{}
	}
	c.values[key] = value
}

// Value is what SetValue kept under key, nil when nothing.
func (c *Cluster) Value(key any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[key]
}

// CreateOptions collects the settings of CreateOption values.
type CreateOptions struct {
	NodePools   []NodePool
	KubeVersion string
	// PersistentVolumes static volumes of VolumeSize offered through the default StorageClass (local provider).
	PersistentVolumes int
	VolumeSize        resource.Quantity
	// Timeout bounds Create as a whole.
	Timeout time.Duration
	// KubeconfigPath, when set, receives a copy of the cluster's kubeconfig.
	KubeconfigPath string
	// ProviderOptions hold the options of one provider, each under a key type of that
	// provider, as context values are (the local provider's WithClusterExec, WithStages,
	// WithPodCommands, WithHostPrograms, ...). Other providers ignore them.
	ProviderOptions map[any]any
}

// CreateOption configures Create.
type CreateOption func(*CreateOptions)

// WithNodePools replaces the default node pools (DefaultNodePools). No pools means no worker nodes.
func WithNodePools(pools ...NodePool) CreateOption {
	return func(o *CreateOptions) { o.NodePools = append([]NodePool{}, pools...) }
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

// BuildOptions is for providers: the defaults, then opts applied in order.
func BuildOptions(opts []CreateOption) CreateOptions {
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

// FromKubeconfig is for providers: a handle on cluster name of provider, with clients loaded
// from a kubeconfig file.
func FromKubeconfig(name, provider, kubeconfig string) (*Cluster, error) {
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

// CopyFile copies src to dst (mode 0600), making dst's directory.
func CopyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// UniqueName returns prefix plus a random suffix, a valid cluster name.
func UniqueName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// CacheDir is ${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}, as in
// build-binaries.sh and install-polyaxon.sh (one definition, polyaxonkeys', for Go).
func CacheDir() string { return polyaxonkeys.CacheDir() }

// LogTail returns the last n lines of a file, or "" when it cannot be read.
func LogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
