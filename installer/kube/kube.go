// Package kube holds the one set of cluster settings shared by client-go and the Helm SDK,
// so every command talks to the same cluster, context and namespace.
package kube

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultNamespace is where a release goes when -n is not given.
const DefaultNamespace = "polyaxon"

// Settings is the single RESTClientGetter for the whole binary. Clients are built lazily,
// so commands that never touch the cluster (render, version) never read the kubeconfig.
type Settings struct {
	Kubeconfig string
	Context    string
	Namespace  string

	flags *genericclioptions.ConfigFlags

	once    sync.Once
	cfg     *rest.Config
	cfgErr  error
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	mapper  meta.RESTMapper
	clientM sync.Mutex
}

// Option tunes Settings.
type Option func(*Settings)

// WithRESTConfig injects a ready rest.Config (tests, e2e) instead of reading a kubeconfig.
func WithRESTConfig(cfg *rest.Config) Option {
	return func(s *Settings) { s.cfg = cfg; s.once.Do(func() {}) }
}

// WithClientset injects a clientset (unit tests with fakes).
func WithClientset(cs kubernetes.Interface) Option { return func(s *Settings) { s.cs = cs } }

// WithDynamic injects a dynamic client (unit tests with fakes).
func WithDynamic(d dynamic.Interface) Option { return func(s *Settings) { s.dyn = d } }

// WithRESTMapper injects a RESTMapper (unit tests with fakes).
func WithRESTMapper(m meta.RESTMapper) Option { return func(s *Settings) { s.mapper = m } }

// WithTransportWrapper wraps the transport of every client read from the kubeconfig, Helm's
// included (a test hook sees each request).
func WithTransportWrapper(w func(http.RoundTripper) http.RoundTripper) Option {
	return func(s *Settings) {
		s.flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
			cfg.Wrap(w)
			return cfg
		}
	}
}

// Access is the rest of kubectl's flags for reaching a cluster, beyond --kubeconfig, --context
// and -n: cli-runtime reads them as kubectl does (a flag wins over the kubeconfig's value).
type Access struct {
	Cluster, User                                      string // --cluster, --user: entries of the kubeconfig
	Server, TLSServerName                              string // --server, --tls-server-name
	CertificateAuthority, ClientCertificate, ClientKey string
	Token                                              string // --token: a bearer token
	InsecureSkipTLSVerify                              bool
	As, AsUID                                          string // --as, --as-uid: impersonation
	AsGroups                                           []string
	RequestTimeout                                     string // --request-timeout: "0" (none), "30s", "1m"
}

// WithAccess applies kubectl's other cluster flags; empty fields leave the kubeconfig's values.
func WithAccess(a Access) Option {
	return func(s *Settings) {
		f := s.flags
		for dst, v := range map[**string]string{
			&f.ClusterName: a.Cluster, &f.AuthInfoName: a.User, &f.APIServer: a.Server, &f.TLSServerName: a.TLSServerName,
			&f.CAFile: a.CertificateAuthority, &f.CertFile: a.ClientCertificate, &f.KeyFile: a.ClientKey,
			&f.BearerToken: a.Token, &f.Impersonate: a.As, &f.ImpersonateUID: a.AsUID, &f.Timeout: a.RequestTimeout,
		} {
			if v != "" {
				*dst = &v
			}
		}
		if a.InsecureSkipTLSVerify {
			f.Insecure = &a.InsecureSkipTLSVerify
		}
		if len(a.AsGroups) > 0 {
			f.ImpersonateGroup = &a.AsGroups
		}
	}
}

// NewSettings follows kubectl: empty kubeconfig means $KUBECONFIG or ~/.kube/config, empty
// context means the current one; an empty namespace means DefaultNamespace.
func NewSettings(kubeconfig, context, namespace string, opts ...Option) *Settings {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	s := &Settings{Kubeconfig: kubeconfig, Context: context, Namespace: namespace}
	f := genericclioptions.NewConfigFlags(true)
	if kubeconfig != "" {
		f.KubeConfig = &s.Kubeconfig
	}
	if context != "" {
		f.Context = &s.Context
	}
	f.Namespace = &s.Namespace
	s.flags = f
	for _, o := range opts {
		o(s)
	}
	return s
}

// RESTClientGetter is what the Helm SDK and kubectl-style helpers take.
func (s *Settings) RESTClientGetter() genericclioptions.RESTClientGetter {
	if s.cfg != nil && s.flags != nil {
		// An injected config must win everywhere, including in Helm.
		return &staticGetter{ConfigFlags: s.flags, cfg: s.cfg}
	}
	return s.flags
}

// RESTConfig reads the kubeconfig once. Errors name the kubeconfig and context so the
// user can fix a wrong --context or a missing file.
func (s *Settings) RESTConfig() (*rest.Config, error) {
	s.once.Do(func() {
		cfg, err := s.flags.ToRESTConfig()
		if err != nil {
			s.cfgErr = fmt.Errorf("reading kubeconfig %s (context %s%s): %w (fix: pass --kubeconfig FILE and --context NAME, or set KUBECONFIG)",
				orDefault(s.Kubeconfig, "$KUBECONFIG or ~/.kube/config"), orDefault(s.Context, "current"), s.givenAccess(), err)
			return
		}
		cfg.QPS, cfg.Burst = 50, 100
		s.cfg = cfg
	})
	return s.cfg, s.cfgErr
}

// Clientset returns the typed client.
func (s *Settings) Clientset() (kubernetes.Interface, error) {
	s.clientM.Lock()
	defer s.clientM.Unlock()
	if s.cs != nil {
		return s.cs, nil
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	s.cs = cs
	return cs, nil
}

// Dynamic returns the dynamic client (server-side dry-run, CRDs, unstructured objects).
func (s *Settings) Dynamic() (dynamic.Interface, error) {
	s.clientM.Lock()
	defer s.clientM.Unlock()
	if s.dyn != nil {
		return s.dyn, nil
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building dynamic client: %w", err)
	}
	s.dyn = d
	return d, nil
}

// RESTMapper maps kinds to resources using (cached) discovery.
func (s *Settings) RESTMapper() (meta.RESTMapper, error) {
	if s.mapper != nil {
		return s.mapper, nil
	}
	if _, err := s.RESTConfig(); err != nil {
		return nil, err
	}
	return s.RESTClientGetter().ToRESTMapper()
}

// Discovery returns a cached discovery client.
func (s *Settings) Discovery() (discovery.CachedDiscoveryInterface, error) {
	return s.RESTClientGetter().ToDiscoveryClient()
}

// HelmConfig initialises a Helm action.Configuration on the same getter, storing releases as
// Secrets (Helm's default driver) in the release namespace.
func (s *Settings) HelmConfig(log func(format string, v ...any)) (*action.Configuration, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(s.RESTClientGetter(), s.Namespace, "secret", log); err != nil {
		return nil, fmt.Errorf("initialising Helm for namespace %s: %w", s.Namespace, err)
	}
	return cfg, nil
}

// givenAccess names the other kubectl flags given, whose values the user may have to fix (the
// token's is not repeated).
func (s *Settings) givenAccess() string {
	f := s.flags
	var given []string
	for _, v := range []struct {
		flag  string
		value *string
	}{{"--server", f.APIServer}, {"--cluster", f.ClusterName}, {"--user", f.AuthInfoName}, {"--request-timeout", f.Timeout},
		{"--certificate-authority", f.CAFile}, {"--client-certificate", f.CertFile}, {"--client-key", f.KeyFile}} {
		if v.value != nil && *v.value != "" && !(v.flag == "--request-timeout" && *v.value == "0") {
			given = append(given, fmt.Sprintf("%s %q", v.flag, *v.value))
		}
	}
	if len(given) == 0 {
		return ""
	}
	return "; " + strings.Join(given, ", ")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// staticGetter serves an injected rest.Config while keeping ConfigFlags' discovery/mapper
// plumbing consistent with it.
type staticGetter struct {
	*genericclioptions.ConfigFlags
	cfg *rest.Config

	once   sync.Once
	disc   discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
	err    error
}

func (g *staticGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *staticGetter) init() {
	g.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(g.cfg)
		if err != nil {
			g.err = err
			return
		}
		g.disc = memCached(dc)
		g.mapper = deferredMapper(g.disc)
	})
}

func (g *staticGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.init()
	return g.disc, g.err
}

func (g *staticGetter) ToRESTMapper() (meta.RESTMapper, error) {
	g.init()
	return g.mapper, g.err
}
