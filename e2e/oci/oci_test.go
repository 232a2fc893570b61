// Package oci tests the chart as an OCI artifact against a real registry (the distribution
// registry, in-process: see registrytest): `make package`'s archive pushed with the Helm SDK's
// registry client, pulled back by polyaxon-deploy through every way a mirror can be reached
// (CA, registry config, client certificate, plain HTTP, skip verify), installed from it on a
// real control plane, installed by plain Helm (the SDK's install action, as `helm install
// oci://...`), and refused when the version is missing, the credentials are wrong or the
// archive does not match its digest.
package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/ProtonMail/go-crypto/openpgp"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cosigntest"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/oci/registrytest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartpkg"
)

// repoPath is where the chart is pushed in every registry: oci://HOST/charts/polyaxon.
const repoPath = "charts/polyaxon"

// published is a chart version pushed to the mirror.
type published struct {
	Version string
	Archive string
	// Digest of the chart layer and of the manifest, as the push reported them.
	Layer, Manifest string
}

// env is the shared setup: a mirror with TLS (test CA) and htpasswd, two chart versions
// pushed to it (signed), and a registry config holding its credentials.
var env struct {
	dir     string
	ca      *registrytest.CA
	mirror  *registrytest.Registry
	config  string // registry config with the mirror's credentials (`helm registry login`)
	keyring string // the signing key (secret keyring; Helm verifies with it too)
	v1, v2  published
}

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oci:", err)
		code = 1
	}
	if err := deleteCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "oci: delete cluster:", err)
		code = 1
	}
	if env.mirror != nil {
		env.mirror.Close()
	}
	_ = os.RemoveAll(env.dir)
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "polyaxon-oci-")
	if err != nil {
		return 1, err
	}
	env.dir = dir
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return 1, err
	}
	if err := pinToolchainAndBinaries(); err != nil {
		return 1, err
	}
	sweepStaleRuns()
	// Helm's and Docker's default credential files live under HOME: keep the user's out.
	home := filepath.Join(dir, "home")
	for k, v := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME": filepath.Join(home, ".cache"), "DOCKER_CONFIG": filepath.Join(home, ".docker")} {
		os.Setenv(k, v)
	}
	os.Unsetenv("HELM_REGISTRY_CONFIG")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 1, err
	}

	if env.ca, err = registrytest.NewCA(dir, "mirror"); err != nil {
		return 1, err
	}
	cert, err := env.ca.Server(dir, "mirror-server")
	if err != nil {
		return 1, err
	}
	env.mirror, err = registrytest.Start(registrytest.Options{Dir: filepath.Join(dir, "mirror"), User: "ci", Password: "s3cret-pass", Cert: cert})
	if err != nil {
		return 1, err
	}
	env.config = filepath.Join(dir, "registry-config.json")
	if err := writeRegistryConfig(env.config, env.mirror.Host, "ci", "s3cret-pass"); err != nil {
		return 1, err
	}
	if env.keyring, err = newKeyring(dir); err != nil {
		return 1, err
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return 1, err
	}
	chartDir := filepath.Join(root, "charts", "polyaxon")
	if env.v1, err = packageAndPush(chartDir, "", env.mirror, env.ca); err != nil {
		return 1, err
	}
	next := semver.MustParse(env.v1.Version).IncPatch()
	if env.v2, err = packageAndPush(chartDir, next.String(), env.mirror, env.ca); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// packageAndPush builds the archive as `make package` does (signed), and pushes it with its
// provenance as `helm push` does.
func packageAndPush(chartDir, version string, reg *registrytest.Registry, ca *registrytest.CA) (published, error) {
	res, err := chartpkg.Package(chartpkg.Options{ChartDir: chartDir, Dest: filepath.Join(env.dir, "dist"), Version: version,
		Sign: true, Keyring: env.keyring, Key: "Polyaxon Deploy Test"})
	if err != nil {
		return published{}, err
	}
	return push(res.Archive, res.Provenance, reg, ca, nil)
}

// push pushes an archive (and its provenance) to reg over TLS trusting ca, with a client
// certificate when cert is set; a nil ca pushes over plain HTTP.
func push(archive, prov string, reg *registrytest.Registry, ca *registrytest.CA, cert *registrytest.KeyPair) (published, error) {
	data, err := os.ReadFile(archive)
	if err != nil {
		return published{}, err
	}
	var opts []registry.PushOption
	if prov != "" {
		p, err := os.ReadFile(prov)
		if err != nil {
			return published{}, err
		}
		opts = append(opts, registry.PushOptProvData(p))
	}
	clientOpts := []registry.ClientOption{registry.ClientOptHTTPClient(registrytest.Client(ca, cert)),
		registry.ClientOptCredentialsFile(filepath.Join(env.dir, "push-credentials.json"))}
	if reg.User != "" {
		clientOpts = append(clientOpts, registry.ClientOptBasicAuth(reg.User, reg.Password))
	}
	if ca == nil {
		clientOpts = append(clientOpts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(clientOpts...)
	if err != nil {
		return published{}, err
	}
	meta, err := chartMeta(data)
	if err != nil {
		return published{}, err
	}
	res, err := client.Push(data, fmt.Sprintf("%s/%s:%s", reg.Host, repoPath, meta), opts...)
	if err != nil {
		return published{}, fmt.Errorf("push %s to %s: %w", archive, reg.Host, err)
	}
	return published{Version: meta, Archive: archive, Layer: res.Chart.Digest, Manifest: res.Manifest.Digest}, nil
}

// writeRegistryConfig writes what `helm registry login HOST` stores: a Docker-style config
// with the account under auths.
func writeRegistryConfig(path, host, user, password string) error {
	doc := map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// newKeyring writes a secret keyring with one new signing key.
func newKeyring(dir string) (string, error) {
	e, err := openpgp.NewEntity("Polyaxon Deploy Test", "oci", "release@example.com", nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "secring.gpg")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := e.SerializePrivate(f, nil); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// pinToolchainAndBinaries fixes, before HOME changes, what is found through HOME: Go's build
// and module caches (the binary is built with them), the control-plane binaries and cosign.
func pinToolchainAndBinaries() error {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(vals) != 3 {
		return fmt.Errorf("go env printed %q", out)
	}
	for i, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		os.Setenv(k, vals[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	bin, err := local.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		return err
	}
	cosign, err := cosigntest.Build()
	if err != nil {
		return err
	}
	os.Setenv(cosigntest.BinEnv, cosign)
	return os.Setenv(local.BinDirEnv, bin)
}

func ref(reg *registrytest.Registry) string { return "oci://" + reg.Host + "/" + repoPath }
