// Package release drives the lifecycle of the Polyaxon Helm release through the Helm SDK:
// install, upgrade, rollback, status, history, uninstall and recovery of a release left
// pending by a crashed run. It also owns the per-release lock (a coordination.k8s.io Lease)
// and the store of the user's inputs that upgrades re-render values from.
//
// One RESTClientGetter feeds both the Helm action.Configuration and the client-go clientset,
// so every call talks to the same cluster with the same credentials.
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
)

// DefaultMaxHistory bounds the number of revisions Helm keeps (and the inputs we keep with them).
const DefaultMaxHistory = 10

// ErrNotInstalled is returned when the release has no revision at all.
var ErrNotInstalled = errors.New("release not installed")

// Client runs release actions for one release in one namespace.
type Client struct {
	name      string
	namespace string
	cfg       *action.Configuration
	kube      kubernetes.Interface

	out        io.Writer
	maxHistory int
	now        func() time.Time
}

// Option configures a Client.
type Option func(*clientOptions)

type clientOptions struct {
	out        io.Writer
	debug      action.DebugLog
	driver     string
	maxHistory int
}

// WithProgress sets where human progress lines go (stderr in the CLI).
func WithProgress(w io.Writer) Option { return func(o *clientOptions) { o.out = w } }

// WithDebugLog sends the Helm SDK's debug lines to log (the CLI's debug log file).
func WithDebugLog(log action.DebugLog) Option { return func(o *clientOptions) { o.debug = log } }

// WithHelmDriver selects Helm's release storage driver ("secret" by default, "memory" in tests).
func WithHelmDriver(name string) Option { return func(o *clientOptions) { o.driver = name } }

// WithMaxHistory bounds the revisions Helm keeps (DefaultMaxHistory when unset, 0 keeps all).
func WithMaxHistory(n int) Option { return func(o *clientOptions) { o.maxHistory = n } }

func buildOptions(opts []Option) clientOptions {
	o := clientOptions{out: io.Discard, debug: func(string, ...interface{}) {}, driver: "secret", maxHistory: DefaultMaxHistory}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// New builds a Client whose Helm configuration and clientset come from the same getter.
// kube must have been built from getter too (installer/kube does both).
func New(getter genericclioptions.RESTClientGetter, kube kubernetes.Interface, namespace, name string, opts ...Option) (*Client, error) {
	o := buildOptions(opts)
	cfg := new(action.Configuration)
	if err := cfg.Init(getter, namespace, o.driver, o.debug); err != nil {
		return nil, fmt.Errorf("initialising Helm for release %s/%s: %w", namespace, name, err)
	}
	return newClient(cfg, kube, namespace, name, o), nil
}

// NewFromConfiguration wraps an existing Helm configuration (tests use the memory driver and a fake
// kube client; the e2e suite may share one configuration between helpers).
func NewFromConfiguration(cfg *action.Configuration, kube kubernetes.Interface, namespace, name string, opts ...Option) *Client {
	o := buildOptions(opts)
	if cfg.Log == nil {
		cfg.Log = o.debug
	}
	return newClient(cfg, kube, namespace, name, o)
}

func newClient(cfg *action.Configuration, kube kubernetes.Interface, namespace, name string, o clientOptions) *Client {
	return &Client{
		name:       name,
		namespace:  namespace,
		cfg:        cfg,
		kube:       kube,
		out:        o.out,
		maxHistory: o.maxHistory,
		now:        time.Now,
	}
}

// Name is the release name.
func (c *Client) Name() string { return c.name }

// Namespace is the release namespace.
func (c *Client) Namespace() string { return c.namespace }

// Kube is the clientset the client uses for non-Helm objects.
func (c *Client) Kube() kubernetes.Interface { return c.kube }

// Configuration exposes the Helm configuration (for dry-run renders by other packages).
func (c *Client) Configuration() *action.Configuration { return c.cfg }

func (c *Client) progress(format string, args ...any) {
	fmt.Fprintf(c.out, format+"\n", args...)
}

// Info is the summary of one revision: the schema printed by status, history and the
// results of install/upgrade/rollback (-o json|yaml).
type Info struct {
	Name         string    `json:"name"`
	Namespace    string    `json:"namespace"`
	Revision     int       `json:"revision"`
	Status       string    `json:"status"`
	Chart        string    `json:"chart"`
	ChartVersion string    `json:"chartVersion"`
	AppVersion   string    `json:"appVersion"`
	Updated      time.Time `json:"updated"`
	Description  string    `json:"description,omitempty"`
	Notes        string    `json:"notes,omitempty"`
}

func infoOf(r *helmrelease.Release) Info {
	i := Info{Name: r.Name, Namespace: r.Namespace, Revision: r.Version}
	if r.Info != nil {
		i.Status = r.Info.Status.String()
		i.Updated = r.Info.LastDeployed.Time
		i.Description = r.Info.Description
		i.Notes = r.Info.Notes
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		i.Chart = r.Chart.Metadata.Name
		i.ChartVersion = r.Chart.Metadata.Version
		i.AppVersion = polyaxonversion.Of(r.Chart.Metadata, r.Config)
	}
	return i
}

// history returns every stored revision, oldest first. An unknown release yields no error and
// an empty slice.
func (c *Client) history() ([]*helmrelease.Release, error) {
	h, err := c.cfg.Releases.History(c.name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("reading history of release %s/%s: %w", c.namespace, c.name, err)
	}
	sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	return h, nil
}

// last returns the newest revision, or ErrNotInstalled.
func (c *Client) last() (*helmrelease.Release, error) {
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("release %q in namespace %q: %w", c.name, c.namespace, ErrNotInstalled)
	}
	return h[len(h)-1], nil
}

// Current returns the newest revision of the release (any status).
func (c *Client) Current(ctx context.Context) (*helmrelease.Release, error) {
	return c.last()
}

// Deployed returns the revision Helm considers deployed, or nil when none is.
func (c *Client) Deployed(ctx context.Context) (*helmrelease.Release, error) {
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Info.Status == helmrelease.StatusDeployed {
			return h[i], nil
		}
	}
	return nil, nil
}

// LastGood returns the newest revision that ran successfully (deployed or superseded) other than
// exclude, or nil when there is none. Helm only supersedes a revision once a later one succeeded,
// so superseded revisions were good.
func (c *Client) LastGood(ctx context.Context, exclude int) (*helmrelease.Release, error) {
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	for i := len(h) - 1; i >= 0; i-- {
		r := h[i]
		if r.Version == exclude {
			continue
		}
		if s := r.Info.Status; s == helmrelease.StatusDeployed || s == helmrelease.StatusSuperseded {
			return r, nil
		}
	}
	return nil, nil
}

// markFailed records rev as failed with the given description.
func (c *Client) markFailed(r *helmrelease.Release, why string) error {
	r.Info.Status = helmrelease.StatusFailed
	r.Info.Description = why
	if err := c.cfg.Releases.Update(r); err != nil {
		return fmt.Errorf("marking revision %d of release %s/%s failed: %w", r.Version, c.namespace, c.name, err)
	}
	return nil
}

// FailPending marks the newest revision failed if it is still pending-*. Callers holding the lock
// run it on the way out: any pending revision then is their own (helm's background goroutine may
// not have recorded the outcome of a cancelled action). It returns the revision it changed, or 0.
func (c *Client) FailPending(ctx context.Context, why string) (int, error) {
	last, err := c.last()
	if errors.Is(err, ErrNotInstalled) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !last.Info.Status.IsPending() {
		return 0, nil
	}
	if why == "" {
		why = fmt.Sprintf("%s interrupted; marked failed by polyaxon-deploy", last.Info.Status)
	}
	if err := c.markFailed(last, why); err != nil {
		return 0, err
	}
	return last.Version, nil
}

// cleanupContext gives cleanup work its own deadline: the caller's context is often the one
// that was just cancelled by Ctrl-C.
func cleanupContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
