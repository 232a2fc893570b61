package oci

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/oci/registrytest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
)

func chartMeta(data []byte) (string, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	return ch.Metadata.Version, nil
}

func load(t *testing.T, o chartsource.Options) (*chartsource.Chart, error) {
	t.Helper()
	return chartsource.Load(context.Background(), o)
}

// TestPullFromMirror: every way Helm reaches a mirror works for --chart oci://, and what is
// loaded is the archive that was pushed (same digest).
func TestPullFromMirror(t *testing.T) {
	trusted := chartsource.RegistryOptions{Config: env.config, CAFile: env.ca.File}
	v1 := semver.MustParse(env.v1.Version)
	for name, tc := range map[string]struct {
		o    chartsource.Options
		want published
	}{
		"exact version":       {chartsource.Options{Ref: ref(env.mirror), Version: env.v1.Version, Registry: trusted}, env.v1},
		"newest version":      {chartsource.Options{Ref: ref(env.mirror), Registry: trusted}, env.v2},
		"version constraint":  {chartsource.Options{Ref: ref(env.mirror), Version: "~" + v1.Original(), Registry: trusted}, env.v2},
		"tag in the ref":      {chartsource.Options{Ref: ref(env.mirror) + ":" + env.v1.Version, Registry: trusted}, env.v1},
		"digest in the ref":   {chartsource.Options{Ref: ref(env.mirror) + "@" + env.v1.Manifest, Registry: trusted}, env.v1},
		"skip TLS verify":     {chartsource.Options{Ref: ref(env.mirror), Version: env.v1.Version, Registry: chartsource.RegistryOptions{Config: env.config, InsecureSkipTLSVerify: true}}, env.v1},
		"tag and same digest": {chartsource.Options{Ref: ref(env.mirror) + "@" + env.v2.Manifest, Version: env.v2.Version, Registry: trusted}, env.v2},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := load(t, tc.o)
			require.NoError(t, err)
			assert.Equal(t, tc.want.Version, ch.Metadata.Version)
			assert.Equal(t, tc.want.Layer, ch.Digest, "the pushed archive")
			assert.Contains(t, ch.Source, "@"+tc.want.Manifest)
		})
	}

	t.Run("plain HTTP", func(t *testing.T) {
		reg := startRegistry(t, registrytest.Options{User: "ci", Password: "http-pass"})
		pub, err := push(env.v1.Archive, "", reg, nil, nil)
		require.NoError(t, err)
		cfg := filepath.Join(t.TempDir(), "config.json")
		require.NoError(t, writeRegistryConfig(cfg, reg.Host, "ci", "http-pass"))
		ch, err := load(t, chartsource.Options{Ref: ref(reg), Version: pub.Version, Registry: chartsource.RegistryOptions{Config: cfg, PlainHTTP: true}})
		require.NoError(t, err)
		assert.Equal(t, pub.Layer, ch.Digest)
	})

	t.Run("client certificate", func(t *testing.T) {
		dir := t.TempDir()
		ca, err := registrytest.NewCA(dir, "mtls")
		require.NoError(t, err)
		server, err := ca.Server(dir, "mtls-server")
		require.NoError(t, err)
		client, err := ca.Client(dir, "deployer")
		require.NoError(t, err)
		reg := startRegistry(t, registrytest.Options{Cert: server, ClientCAs: ca})
		_, err = push(env.v1.Archive, "", reg, ca, client)
		require.NoError(t, err)
		ch, err := load(t, chartsource.Options{Ref: ref(reg), Version: env.v1.Version,
			Registry: chartsource.RegistryOptions{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}})
		require.NoError(t, err)
		assert.Equal(t, env.v1.Version, ch.Metadata.Version)

		_, err = load(t, chartsource.Options{Ref: ref(reg), Version: env.v1.Version, Registry: chartsource.RegistryOptions{CAFile: ca.File}})
		assert.Error(t, err, "without the client certificate the registry refuses the connection")
	})
}

// TestMirrorRefusals: a missing version, refused credentials, an untrusted certificate and an
// archive that does not match its digest all fail with the reference and the fix.
func TestMirrorRefusals(t *testing.T) {
	trusted := chartsource.RegistryOptions{Config: env.config, CAFile: env.ca.File}

	t.Run("no such version", func(t *testing.T) {
		_, err := load(t, chartsource.Options{Ref: ref(env.mirror), Version: "9.9.9", Registry: trusted})
		require.ErrorIs(t, err, chartsource.ErrNotFound)
		assert.ErrorContains(t, err, "chart "+ref(env.mirror)+" version 9.9.9")
		assert.ErrorContains(t, err, "pass --version with a version the registry has ("+env.v1.Version+", "+env.v2.Version+")")
	})
	t.Run("no version matches the constraint", func(t *testing.T) {
		_, err := load(t, chartsource.Options{Ref: ref(env.mirror), Version: ">= 99", Registry: trusted})
		require.ErrorIs(t, err, chartsource.ErrNotFound)
		assert.ErrorContains(t, err, "pass --version with a version the registry has")
	})
	t.Run("wrong password", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.json")
		require.NoError(t, writeRegistryConfig(cfg, env.mirror.Host, "ci", "wrong"))
		_, err := load(t, chartsource.Options{Ref: ref(env.mirror), Version: env.v1.Version, Registry: chartsource.RegistryOptions{Config: cfg, CAFile: env.ca.File}})
		require.ErrorIs(t, err, chartsource.ErrDenied)
		assert.ErrorContains(t, err, "chart "+ref(env.mirror)+" version "+env.v1.Version)
		assert.ErrorContains(t, err, "helm registry login "+env.mirror.Host+" --registry-config FILE")
		assert.ErrorContains(t, err, cfg)
	})
	t.Run("no credentials", func(t *testing.T) {
		_, err := load(t, chartsource.Options{Ref: ref(env.mirror), Version: env.v1.Version, Registry: chartsource.RegistryOptions{CAFile: env.ca.File}})
		require.ErrorIs(t, err, chartsource.ErrDenied)
	})
	t.Run("certificate not trusted", func(t *testing.T) {
		_, err := load(t, chartsource.Options{Ref: ref(env.mirror), Version: env.v1.Version, Registry: chartsource.RegistryOptions{Config: env.config}})
		require.ErrorIs(t, err, chartsource.ErrTLS)
		assert.ErrorContains(t, err, "--ca-file")
	})
	t.Run("archive altered in the registry", func(t *testing.T) {
		reg, pub := tamperedRegistry(t)
		_, err := load(t, chartsource.Options{Ref: ref(reg), Version: pub.Version, Registry: chartsource.RegistryOptions{CAFile: env.ca.File}})
		require.ErrorIs(t, err, chartsource.ErrDigest)
		assert.ErrorContains(t, err, "chart "+ref(reg)+" version "+pub.Version)
		assert.ErrorContains(t, err, "refused")
	})
}

// tamperedRegistry is a registry (TLS, no authentication) holding v1 whose chart layer was
// altered on disk after the push: same size, one byte flipped.
func tamperedRegistry(t *testing.T) (*registrytest.Registry, published) {
	t.Helper()
	cert, err := env.ca.Server(t.TempDir(), "tampered")
	require.NoError(t, err)
	reg := startRegistry(t, registrytest.Options{Cert: cert})
	pub, err := push(env.v1.Archive, "", reg, env.ca, nil)
	require.NoError(t, err)
	blob, err := reg.BlobPath(pub.Layer)
	require.NoError(t, err)
	b, err := os.ReadFile(blob)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(blob, b, 0o600))
	return reg, pub
}

func startRegistry(t *testing.T, o registrytest.Options) *registrytest.Registry {
	t.Helper()
	o.Dir = t.TempDir()
	reg, err := registrytest.Start(o)
	require.NoError(t, err)
	t.Cleanup(reg.Close)
	return reg
}
