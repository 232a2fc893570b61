// Package registrytest runs a real OCI registry in the test process: the CNCF distribution
// registry's own HTTP handler (github.com/distribution/distribution/v3, the code behind the
// `registry` image), with filesystem storage in a temporary directory, htpasswd (bcrypt)
// authentication and TLS from a CA made for the test, on 127.0.0.1. It stands in for a
// company's internal chart mirror.
//
// It lives in its own Go module (e2e/oci) so that the registry's dependencies (OpenTelemetry,
// Redis and Prometheus clients, gRPC) stay out of the installer's module graph.
package registrytest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	// Registered by import, as the registry binary does.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

// Registry is a running registry.
type Registry struct {
	// Host is host:port, as in oci://HOST/PATH.
	Host string
	// Root is the storage directory (docker/registry/v2/...).
	Root     string
	User     string
	Password string

	server *httptest.Server
	cancel context.CancelFunc
}

// Options of Start.
type Options struct {
	// Dir holds the storage and the htpasswd file.
	Dir string
	// User and Password are the one account of the registry (htpasswd). Empty: no authentication.
	User, Password string
	// Cert serves TLS with this certificate; nil serves plain HTTP.
	Cert *KeyPair
	// ClientCAs, when set, makes the registry require a client certificate signed by them.
	ClientCAs *CA
}

// Start runs a registry until Close.
func Start(o Options) (*Registry, error) {
	// The registry logs every request through logrus; tests read their own output instead.
	logrus.SetOutput(io.Discard)

	root := filepath.Join(o.Dir, "storage")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	cfg := &configuration.Configuration{
		Storage: configuration.Storage{
			"filesystem": configuration.Parameters{"rootdirectory": root},
			"delete":     configuration.Parameters{"enabled": true},
		},
	}
	cfg.HTTP.Secret = "registrytest"
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(o.Dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "registrytest", "path": htpasswd}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	app := handlers.NewApp(ctx, cfg)

	srv := httptest.NewUnstartedServer(app)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	if o.Cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{o.Cert.TLS}, MinVersion: tls.VersionTLS12}
		if o.ClientCAs != nil {
			srv.TLS.ClientCAs = o.ClientCAs.Pool
			srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	host := strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
	return &Registry{Host: host, Root: root, User: o.User, Password: o.Password, server: srv, cancel: cancel}, nil
}

// Close stops the registry.
func (r *Registry) Close() {
	r.server.Close()
	r.cancel()
}

// BlobPath is where the filesystem storage keeps the blob of digest ("sha256:...").
func (r *Registry) BlobPath(digest string) (string, error) {
	algo, hex, ok := strings.Cut(digest, ":")
	if !ok || len(hex) < 2 {
		return "", fmt.Errorf("not a digest: %q", digest)
	}
	return filepath.Join(r.Root, "docker", "registry", "v2", "blobs", algo, hex[:2], hex, "data"), nil
}

// Client is an HTTP client that trusts the registry's CA (nil CA: the system's).
func Client(ca *CA, cert *KeyPair) *http.Client {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		cfg.RootCAs = ca.Pool
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}
