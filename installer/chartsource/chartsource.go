// Package chartsource loads the chart a command works with: the one embedded in the binary, a
// chart directory or .tgz archive on disk, or a chart pulled from an OCI registry (an internal
// mirror with its own CA and credentials included). Loading goes through the Helm SDK: its
// chart loader, and for OCI its registry client, which checks every pulled blob against its
// digest.
//
// Nothing here talks to a Kubernetes cluster, so a bad reference fails before any command
// touches one.
package chartsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Embedded is the Source of the chart built into the binary.
const Embedded = "embedded"

// ChartName is the name every source must deliver: the installer knows this chart's contract only.
const ChartName = "polyaxon"

// Options say where the chart comes from.
type Options struct {
	// Ref is "" (the embedded chart), a chart directory, a .tgz archive, or
	// oci://HOST/PATH/polyaxon, optionally with :TAG or @sha256:DIGEST.
	Ref string
	// Version selects the version of an OCI chart: exact, or a semver constraint such as
	// "~2.15" (default: the newest tag that is a version).
	Version string
	// Registry says how to reach and log in to the registry of an OCI chart.
	Registry RegistryOptions
	// Log receives the registry client's progress lines ("Pulled: ...", "Digest: ...").
	Log io.Writer
}

// RegistryOptions reach an OCI registry. They carry Helm's flag names.
type RegistryOptions struct {
	// Config is the credentials file written by `helm registry login` (--registry-config).
	// Default: Helm's ($HELM_REGISTRY_CONFIG or ~/.config/helm/registry/config.json), then
	// Docker's ~/.docker/config.json.
	Config string
	// CAFile verifies the registry's certificate with this CA bundle (--ca-file).
	CAFile string
	// CertFile and KeyFile are a client certificate for registries that ask for one.
	CertFile, KeyFile string
	// InsecureSkipTLSVerify accepts any certificate (--insecure-skip-tls-verify).
	InsecureSkipTLSVerify bool
	// PlainHTTP talks HTTP instead of HTTPS (--plain-http).
	PlainHTTP bool
}

// set reports whether any registry option was given.
func (r RegistryOptions) set() bool {
	return r != RegistryOptions{}
}

// Chart is a loaded chart and where it came from.
type Chart struct {
	*chart.Chart
	// Source names where it came from: "embedded", the path given, or for OCI the resolved
	// reference with its digest (oci://HOST/PATH/polyaxon:VERSION@sha256:...).
	Source string
	// Digest is the sha256 digest of the pulled archive (OCI only).
	Digest string
}

// IsOCI reports whether ref names a chart in an OCI registry.
func IsOCI(ref string) bool { return registry.IsOCI(ref) }

// Validate checks that the options fit together, without reading anything: --version and the
// registry options apply to oci:// references only. The error names the flag and the fix.
func (o Options) Validate() error {
	if IsOCI(o.Ref) {
		if o.Registry.PlainHTTP && (o.Registry.CAFile != "" || o.Registry.CertFile != "" || o.Registry.InsecureSkipTLSVerify) {
			return errors.New("--plain-http talks HTTP without TLS: drop --ca-file/--cert-file/--insecure-skip-tls-verify, or drop --plain-http")
		}
		if (o.Registry.CertFile == "") != (o.Registry.KeyFile == "") {
			return errors.New("--cert-file and --key-file go together: give both (the registry's client certificate and its key)")
		}
		return nil
	}
	what := "the embedded chart"
	if o.Ref != "" {
		what = "--chart " + o.Ref
	}
	if o.Version != "" {
		return fmt.Errorf("--version %s selects a chart version in an OCI registry, but %s is not an oci:// reference: drop --version, or pass --chart oci://HOST/PATH/polyaxon", o.Version, what)
	}
	if o.Registry.set() {
		return fmt.Errorf("registry options (--registry-config, --ca-file, --cert-file, --key-file, --insecure-skip-tls-verify, --plain-http) apply to --chart oci://... only, not to %s (the API server's certificate: --kube-insecure-skip-tls-verify)", what)
	}
	return nil
}

// Load loads the chart named by o.
func Load(ctx context.Context, o Options) (*Chart, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	switch {
	case o.Ref == "":
		ch, err := render.LoadFS(charts.FS, charts.Root)
		if err != nil {
			return nil, fmt.Errorf("embedded chart: %w", err)
		}
		return &Chart{Chart: ch, Source: Embedded}, nil
	case IsOCI(o.Ref):
		return pull(ctx, o)
	}
	st, err := os.Stat(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("--chart %s: %w (fix: --chart takes a chart directory containing Chart.yaml, a .tgz archive, or oci://HOST/PATH/polyaxon)", o.Ref, err)
	}
	if st.IsDir() {
		ch, err := render.LoadDir(o.Ref)
		if err != nil {
			return nil, err
		}
		return &Chart{Chart: ch, Source: o.Ref}, nil
	}
	ch, err := loader.LoadFile(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("loading chart archive %s: %w (fix: --chart must be a chart directory, a .tgz made by `make package` or `helm package`, or oci://...)", o.Ref, err)
	}
	return &Chart{Chart: ch, Source: o.Ref}, checkName(ch, o.Ref)
}

// pull resolves the version, pulls the chart layer (the registry client checks it against the
// digest in the manifest) and loads the archive.
func pull(ctx context.Context, o Options) (*Chart, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg := o.Registry.Config; cfg != "" {
		if _, err := os.Stat(cfg); err != nil {
			return nil, fmt.Errorf("chart %s: --registry-config %s: %w (fix: log in with `helm registry login %s --registry-config %s`)", o.Ref, cfg, err, registryHost(o.Ref), cfg)
		}
	}
	client, err := NewRegistryClient(o.Registry, o.Log)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", o.Ref, err)
	}
	u, err := url.Parse(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("chart %s: not a valid reference: %w (fix: oci://HOST/PATH/polyaxon)", o.Ref, err)
	}
	resolved, err := client.ValidateReference(o.Ref, o.Version, u)
	if err != nil {
		return nil, explain(o, err, client)
	}
	ref := strings.TrimPrefix(resolved.String(), registry.OCIScheme+"://")
	res, err := client.Pull(ref, registry.PullOptWithChart(true))
	if err != nil {
		return nil, explain(o, err, client)
	}
	// The client verified the layer against the manifest while pulling; checking the bytes
	// we load once more costs nothing and does not depend on how it did so.
	sum := sha256.Sum256(res.Chart.Data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != res.Chart.Digest {
		return nil, &DigestError{Ref: o.Ref, Want: res.Chart.Digest, Got: got}
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("chart %s: the pulled archive is not a chart: %w", o.Ref, err)
	}
	if err := checkName(ch, o.Ref); err != nil {
		return nil, err
	}
	return &Chart{Chart: ch, Source: registry.OCIScheme + "://" + ref + "@" + res.Manifest.Digest, Digest: res.Chart.Digest}, nil
}

// checkName refuses a chart other than ours: profiles, checks and the upgrade pipeline
// depend on this chart's contract.
func checkName(ch *chart.Chart, ref string) error {
	if ch.Metadata == nil || ch.Metadata.Name != ChartName {
		name := ""
		if ch.Metadata != nil {
			name = ch.Metadata.Name
		}
		return fmt.Errorf("%s is chart %q, not %q: polyaxon-deploy installs the Polyaxon chart only (fix: point --chart at a polyaxon chart)", ref, name, ChartName)
	}
	return nil
}

// NewRegistryClient returns the Helm SDK's registry client for these options, as the helm CLI
// builds it: TLS settings when any is given, else the defaults; credentials from Config.
func NewRegistryClient(r RegistryOptions, log io.Writer) (*registry.Client, error) {
	if log == nil {
		log = io.Discard
	}
	if r.CertFile != "" || r.KeyFile != "" || r.CAFile != "" || r.InsecureSkipTLSVerify {
		c, err := registry.NewRegistryClientWithTLS(log, r.CertFile, r.KeyFile, r.CAFile, r.InsecureSkipTLSVerify, r.Config, false)
		if err != nil {
			return nil, fmt.Errorf("registry TLS settings (--ca-file/--cert-file/--key-file): %w", err)
		}
		return c, nil
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(log), registry.ClientOptEnableCache(true)}
	if r.Config != "" {
		opts = append(opts, registry.ClientOptCredentialsFile(r.Config))
	}
	if r.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry client (--registry-config %s): %w", r.Config, err)
	}
	return c, nil
}
