package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// Provider runs a real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) plus the kwok controller as local processes through
// `kwokctl --runtime binary`. Nodes are Node objects kwok keeps Ready; pods on them get
// their status from kwok stages. No containers, no Docker; everything listens on 127.0.0.1.
type Provider struct {
	binDir  string
	workDir string
	log     io.Writer

	mu   sync.Mutex
	open map[string]*cluster.Cluster
}

// Option configures NewProvider.
type Option func(*Provider)

// WithBinDir uses binaries from dir instead of running build-binaries.sh.
func WithBinDir(dir string) Option { return func(p *Provider) { p.binDir = dir } }

// WithWorkDir sets KWOK_WORKDIR (default: <CacheDir>/kwok). Cluster state, logs and pid files live under it.
func WithWorkDir(dir string) Option { return func(p *Provider) { p.workDir = dir } }

// WithLogOutput receives progress: the first build of the binaries and a line per cluster
// created (default: discarded). kwokctl's own output goes to <workdir>/logs/<name>.log.
func WithLogOutput(w io.Writer) Option { return func(p *Provider) { p.log = w } }

// NewProvider returns the kwok-based provider.
func NewProvider(opts ...Option) *Provider {
	p := &Provider{workDir: filepath.Join(cluster.CacheDir(), "kwok"), log: io.Discard, open: map[string]*cluster.Cluster{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// bins resolves (once) and checks the binary directory.
func (p *Provider) bins(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.binDir == "" {
		d, err := EnsureBinaries(ctx, p.log)
		if err != nil {
			return "", err
		}
		p.binDir = d
		return d, nil
	}
	return p.binDir, checkBinaries(p.binDir)
}

// Name implements Provider.
func (p *Provider) Name() string { return "local" }

var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// ClusterDir is kwokctl's directory for the cluster (pids/, logs/, pki/, kwok.yaml).
func (p *Provider) ClusterDir(name string) string {
	return filepath.Join(p.workDir, "clusters", name)
}

func (p *Provider) kubeconfigPath(name string) string {
	return filepath.Join(p.workDir, "kubeconfigs", name+".yaml")
}

func (p *Provider) configPath(name string) string {
	return filepath.Join(p.workDir, "configs", name+".yaml")
}

func (p *Provider) logPath(name string) string {
	return filepath.Join(p.workDir, "logs", name+".log")
}

// Create implements Provider.
func (p *Provider) Create(ctx context.Context, name string, opts ...cluster.CreateOption) (*cluster.Cluster, error) {
	o := cluster.BuildOptions(opts)
	lo := localOptionsOf(&o)
	if !clusterNameRE.MatchString(name) {
		return nil, fmt.Errorf("local cluster %q: name must match %s", name, clusterNameRE)
	}
	// Resolve binaries before the timeout starts: the first build takes ~15 minutes.
	binDir, err := p.bins(ctx)
	if err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.KubeVersion != "" {
		if err := checkKubeVersion(ctx, binDir, o.KubeVersion); err != nil {
			return nil, fmt.Errorf("local cluster %q: %w", name, err)
		}
	}
	if _, err := os.Stat(p.ClusterDir(name)); err == nil {
		return nil, fmt.Errorf("local cluster %q already exists in %s (delete it first)", name, p.ClusterDir(name))
	}

	defaults, err := loadDefaultStages(binDir)
	if err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	stages := append(append(defaults, FailPodStage()), lo.Stages...)
	if lo.PodCommands {
		stages = append(stages, RunPodStage())
	}
	if hosted := append(append([]Program{}, lo.Programs...), lo.ProgramStages...); len(hosted) > 0 {
		stages = append(stages, HostProgramStages(hosted)...)
	}
	for _, f := range []string{p.configPath(name), p.kubeconfigPath(name), p.logPath(name)} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, fmt.Errorf("local cluster %q: %w", name, err)
		}
	}

	// An attempt whose control plane does not come up (a port taken by a stranger between
	// reservation and bind, a component dying on a loaded machine) is discarded and the
	// cluster created again, on new ports.
	var c *cluster.Cluster
	for attempt := 1; ; attempt++ {
		c, err = p.createOnce(ctx, name, binDir, stages, o)
		if err == nil {
			break
		}
		var notUp *controlPlaneDownError
		if !errors.As(err, &notUp) || attempt == maxCreateAttempts || ctx.Err() != nil {
			return nil, err
		}
		fmt.Fprintf(p.log, "local cluster %s: attempt %d: %v; creating it again\n", name, attempt, err)
	}
	if o.KubeconfigPath != "" {
		if err := cluster.CopyFile(c.KubeconfigPath, o.KubeconfigPath); err != nil {
			return nil, fmt.Errorf("local cluster %q: copy kubeconfig: %w", name, err)
		}
	}
	fmt.Fprintf(p.log, "local cluster %s ready in %s\n", name, time.Since(start).Round(10*time.Millisecond))
	return c, nil
}

// maxCreateAttempts bounds how often Create starts a control plane that does not come up.
const maxCreateAttempts = 3

// controlPlaneReadyTimeout is how long one attempt waits for the control plane; a healthy
// one is ready in seconds even on a loaded 2-core machine.
const controlPlaneReadyTimeout = 90 * time.Second

// controlPlaneDownError is a control plane that did not become ready: worth another attempt.
type controlPlaneDownError struct{ err error }

func (e *controlPlaneDownError) Error() string { return e.err.Error() }
func (e *controlPlaneDownError) Unwrap() error { return e.err }

// createOnce runs kwokctl and waits for the cluster; on failure nothing of it is left
// running and the error carries the end of the component logs.
func (p *Provider) createOnce(ctx context.Context, name, binDir string, stages []Stage, o cluster.CreateOptions) (*cluster.Cluster, error) {
	ports, err := reservePorts(portReservationFile, clusterPorts, componentPorts, time.Now())
	if err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	lo := localOptionsOf(&o)
	kopts := kwokctlOptions{KubeVersion: o.KubeVersion, BinDir: binDir, Ports: newComponentPortSet(ports)}
	if len(lo.Programs)+len(lo.ProgramStages) > 0 {
		// Host programs' logs are served per pod: Logs objects made at run time.
		kopts.EnableCRDs = []string{"Logs"}
	}
	cfg, err := renderKwokConfig(kopts, stages, lo.ClusterExecs)
	if err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	if err := os.WriteFile(p.configPath(name), cfg, 0o644); err != nil {
		return nil, fmt.Errorf("local cluster %q: write kwok config: %w", name, err)
	}
	createArgs := []string{"--name", name, "-c", p.configPath(name), "create", "cluster",
		"--runtime", "binary", "--kubeconfig", p.kubeconfigPath(name)}
	if err := p.kwokctl(ctx, name, binDir, createArgs...); err != nil {
		return nil, fmt.Errorf("local cluster %q: kwokctl create cluster: %w (%s)", name, err, p.discard(ctx, name))
	}
	c, err := p.connect(name)
	if err == nil {
		readyCtx, cancel := context.WithTimeout(ctx, controlPlaneReadyTimeout)
		err = waitControlPlane(readyCtx, c.Clientset)
		if err == nil {
			err = probeKwokController(readyCtx, c.Clientset)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			err = &controlPlaneDownError{err}
		}
	}
	if err == nil {
		err = p.setup(ctx, c, o)
	}
	if err != nil {
		msg := p.discard(ctx, name)
		var notUp *controlPlaneDownError
		if errors.As(err, &notUp) {
			return nil, &controlPlaneDownError{fmt.Errorf("local cluster %q: %w (%s)", name, err, msg)}
		}
		return nil, fmt.Errorf("local cluster %q: %w (%s)", name, err, msg)
	}
	return c, nil
}

// probeNodeName is the node probeKwokController creates and deletes.
const probeNodeName = "kwok-probe"

// probeKwokController checks that the kwok controller simulates nodes: a node created without
// status must turn Ready. The control plane's own checks cannot see a kwok controller that
// died, yet without it no pod ever runs (and nodes created with a Ready status look fine).
func probeKwokController(ctx context.Context, cs kubernetes.Interface) error {
	if _, err := cs.CoreV1().Nodes().Create(ctx, kwokNode(probeNodeName, cluster.NodePool{Name: "probe"}), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kwok controller probe: create node %s: %w", probeNodeName, err)
	}
	if err := cluster.WaitNodesReady(ctx, cs, []string{probeNodeName}); err != nil {
		return fmt.Errorf("kwok controller probe: it did not make node %s Ready: %w", probeNodeName, err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, probeNodeName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("kwok controller probe: delete node %s: %w", probeNodeName, err)
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, probeNodeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// discard deletes a cluster whose creation failed, keeping its component logs for diagnosis.
func (p *Provider) discard(ctx context.Context, name string) string {
	kept := filepath.Join(p.workDir, "logs", name+"-components")
	_ = os.RemoveAll(kept)
	msg := "logs: " + p.logPath(name) + ", " + kept
	if err := os.Rename(filepath.Join(p.ClusterDir(name), "logs"), kept); err != nil {
		msg = "logs: " + p.logPath(name)
	} else {
		// The work dir may be a temp dir removed with the test: say here why it failed.
		for _, comp := range []string{"kube-apiserver", "etcd", "kwok-controller"} {
			if tail := cluster.LogTail(filepath.Join(kept, comp+".log"), 8); tail != "" {
				msg += "\n--- " + comp + " (last lines) ---\n" + tail
			}
		}
	}
	if err := p.delete(context.WithoutCancel(ctx), name, true); err != nil {
		msg += "; cleanup: " + err.Error()
	}
	return msg
}

// Get connects to an existing local cluster.
func (p *Provider) Get(_ context.Context, name string) (*cluster.Cluster, error) {
	if _, err := os.Stat(p.kubeconfigPath(name)); err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	return p.connect(name)
}

func (p *Provider) connect(name string) (*cluster.Cluster, error) {
	c, err := cluster.FromKubeconfig(name, p.Name(), p.kubeconfigPath(name))
	if err != nil {
		return nil, err
	}
	c.SetNodePoolAdder(func(ctx context.Context, pool cluster.NodePool) ([]string, error) {
		return createPoolNodes(ctx, c.Clientset, pool)
	})
	c.SetValue(podsDirKey{}, filepath.Join(p.ClusterDir(name), "pods"))
	return c, nil
}

// setup adds storage and nodes to a ready control plane.
func (p *Provider) setup(ctx context.Context, c *cluster.Cluster, o cluster.CreateOptions) error {
	volDir := filepath.Join(p.ClusterDir(c.Name), "volumes")
	if err := ensureStorage(ctx, c.Clientset, volDir, o.PersistentVolumes, o.VolumeSize); err != nil {
		return err
	}
	var names []string
	for _, pool := range o.NodePools {
		n, err := createPoolNodes(ctx, c.Clientset, pool)
		if err != nil {
			return err
		}
		names = append(names, n...)
	}
	if err := cluster.WaitNodesReady(ctx, c.Clientset, names); err != nil {
		return err
	}
	lo := localOptionsOf(&o)
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { runReclaimer(bg, c.Clientset) })
	if lo.PodCommands {
		wg.Go(func() { runPodCommands(bg, c) })
	}
	if len(lo.Programs) > 0 {
		hosts, err := newHostRunner(c, PodsDir(c), lo.Programs, lo.Backends)
		if err != nil {
			stop()
			return err
		}
		c.SetValue(hostsKey{}, hosts)
		wg.Go(func() { hosts.run(bg) })
	}
	done := make(chan struct{})
	c.SetBackground(stop, done)
	go func() { wg.Wait(); close(done) }()
	p.mu.Lock()
	p.open[c.Name] = c
	p.mu.Unlock()
	return nil
}

// waitControlPlane waits until the API server is ready, the scheduler and controller-manager
// hold their leader leases, and the controller-manager has created the default ServiceAccount.
func waitControlPlane(ctx context.Context, cs kubernetes.Interface) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			last = fmt.Errorf("kube-apiserver /readyz: %w", err)
			return false, nil
		}
		for _, l := range []string{"kube-scheduler", "kube-controller-manager"} {
			lease, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, l, metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
				last = fmt.Errorf("%s has no leader lease yet: %v", l, err)
				return false, nil
			}
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = fmt.Errorf("default ServiceAccount: %w", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for control plane: %v: %w", last, err)
	}
	return nil
}

// Delete implements Provider. It stops every process of the cluster and removes its files.
func (p *Provider) Delete(ctx context.Context, name string) error {
	return p.delete(ctx, name, false)
}

func (p *Provider) delete(ctx context.Context, name string, keepLogs bool) error {
	p.mu.Lock()
	if c := p.open[name]; c != nil {
		c.Close()
		delete(p.open, name)
	}
	p.mu.Unlock()

	pids, _ := p.PIDs(name)
	var errs []error
	if _, err := os.Stat(p.ClusterDir(name)); err == nil {
		binDir, _ := p.bins(ctx) // on error kwokctl falls back to PATH
		if err := p.kwokctl(ctx, name, binDir, "--name", name, "delete", "cluster", "--kubeconfig", p.kubeconfigPath(name)); err != nil {
			errs = append(errs, fmt.Errorf("kwokctl delete cluster: %w", err))
		}
	}
	// Host programs whose runner is gone (a killed test) still run in the cluster's pod dirs.
	killProcessesUnder(filepath.Join(p.ClusterDir(name), "pods"))
	if alive := waitExited(ctx, pids, 10*time.Second); len(alive) > 0 {
		// kwokctl did not stop them: they are this cluster's own processes (pid files), kill them.
		for _, pid := range alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if alive = waitExited(ctx, alive, 5*time.Second); len(alive) > 0 {
			errs = append(errs, fmt.Errorf("processes still running after delete: %v", alive))
		}
	}
	if err := os.RemoveAll(p.ClusterDir(name)); err != nil {
		errs = append(errs, err)
	}
	files := []string{p.configPath(name), p.kubeconfigPath(name)}
	if !keepLogs {
		files = append(files, p.logPath(name))
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete local cluster %q: %w", name, err)
	}
	return nil
}

// List names the clusters in the provider's work dir.
func (p *Provider) List() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(p.workDir, "clusters"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// DeleteAll deletes every cluster in the provider's work dir (e.g. left by a killed test run).
func (p *Provider) DeleteAll(ctx context.Context) error {
	names, err := p.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, p.Delete(ctx, n))
	}
	return errors.Join(errs...)
}
