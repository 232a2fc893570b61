package chartsource

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// NewRepository returns an OCI repository client (oras-go) for ref (oci://HOST/PATH or
// HOST/PATH) reached with the same options and credentials as the Helm client: for what Helm's
// client does not push, such as a chart's cosign signature or Artifact Hub's metadata.
func NewRepository(ref string, r RegistryOptions) (*remote.Repository, error) {
	repo, err := remote.NewRepository(strings.TrimPrefix(ref, registry.OCIScheme+"://"))
	if err != nil {
		return nil, fmt.Errorf("%s: not a repository reference: %w (fix: oci://HOST/PATH)", ref, err)
	}
	repo.PlainHTTP = r.PlainHTTP
	store, err := credentialStore(r.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials: %w", ref, err)
	}
	tlsConfig, err := r.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	repo.Client = &auth.Client{
		Client:     &http.Client{Transport: retry.NewTransport(transport)},
		Cache:      auth.NewCache(),
		Credential: credentials.Credential(store),
	}
	return repo, nil
}

// credentialStore reads the file `helm registry login` writes: the one given, else Helm's
// default with Docker's config behind it, as the Helm client does.
func credentialStore(path string) (credentials.Store, error) {
	if path != "" {
		return credentials.NewStore(path, credentials.StoreOptions{})
	}
	helm, err := credentials.NewStore(cli.New().RegistryConfig, credentials.StoreOptions{})
	if err != nil {
		return nil, err
	}
	docker, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return nil, err
	}
	return credentials.NewStoreWithFallbacks(helm, docker), nil
}

// tlsConfig is the client side of --ca-file, --cert-file/--key-file and
// --insecure-skip-tls-verify.
func (r RegistryOptions) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: r.InsecureSkipTLSVerify} //nolint:gosec // the user's --insecure-skip-tls-verify
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", r.CAFile)
		}
	}
	if r.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
