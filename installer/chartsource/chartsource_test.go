package chartsource

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

const chartDir = "../../charts/polyaxon"

func TestLoadFromDisk(t *testing.T) {
	src, err := loader.LoadDir(chartDir)
	require.NoError(t, err)

	emb, err := Load(context.Background(), Options{})
	require.NoError(t, err)
	assert.Equal(t, Embedded, emb.Source)
	assert.Equal(t, src.Metadata.Version, emb.Metadata.Version)

	dir, err := Load(context.Background(), Options{Ref: chartDir})
	require.NoError(t, err)
	assert.Equal(t, chartDir, dir.Source)

	archive, err := chartutil.Save(src, t.TempDir())
	require.NoError(t, err)
	tgz, err := Load(context.Background(), Options{Ref: archive})
	require.NoError(t, err)
	assert.Equal(t, archive, tgz.Source)
	assert.Equal(t, len(src.Templates), len(tgz.Templates))

	other := *src
	meta := *src.Metadata
	meta.Name = "not-polyaxon"
	other.Metadata = &meta
	archive, err = chartutil.Save(&other, t.TempDir())
	require.NoError(t, err)
	_, err = Load(context.Background(), Options{Ref: archive})
	assert.ErrorContains(t, err, `is chart "not-polyaxon", not "polyaxon"`)
}

func TestOptionsThatDoNotFit(t *testing.T) {
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"version of a directory":  {Options{Ref: chartDir, Version: "1.0.0"}, "not an oci:// reference"},
		"version of the embedded": {Options{Version: "1.0.0"}, "the embedded chart is not an oci:// reference"},
		"CA for a directory":      {Options{Ref: chartDir, Registry: RegistryOptions{CAFile: "ca.pem"}}, "apply to --chart oci://... only"},
		"plain HTTP with TLS":     {Options{Ref: "oci://h/p/polyaxon", Registry: RegistryOptions{PlainHTTP: true, CAFile: "ca.pem"}}, "--plain-http talks HTTP"},
		"cert without key":        {Options{Ref: "oci://h/p/polyaxon", Registry: RegistryOptions{CertFile: "c.pem"}}, "--cert-file and --key-file go together"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(context.Background(), tc.o)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRegistryProblemsSayWhatToFix(t *testing.T) {
	t.Run("missing registry config", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "config.json")
		_, err := Load(context.Background(), Options{Ref: "oci://127.0.0.1:1/charts/polyaxon", Version: "1.0.0", Registry: RegistryOptions{Config: missing}})
		assert.ErrorContains(t, err, "helm registry login 127.0.0.1:1 --registry-config "+missing)
	})
	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		_, err = Load(context.Background(), Options{Ref: "oci://" + addr + "/charts/polyaxon", Version: "1.0.0", Registry: RegistryOptions{PlainHTTP: true}})
		assert.ErrorContains(t, err, "chart oci://"+addr+"/charts/polyaxon version 1.0.0")
		assert.ErrorContains(t, err, "check that "+addr+" is the registry's host:port")
	})
	t.Run("CA file that is not there", func(t *testing.T) {
		_, err := Load(context.Background(), Options{Ref: "oci://127.0.0.1:1/charts/polyaxon", Registry: RegistryOptions{CAFile: filepath.Join(t.TempDir(), "ca.pem")}})
		assert.ErrorContains(t, err, "--ca-file")
	})
}

func TestMain(m *testing.M) {
	// The registry client reads Helm's and Docker's credential files: keep the user's out.
	home, err := os.MkdirTemp("", "chartsource-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	os.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
	os.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(home, "helm-registry.json"))
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
