package main

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// TestChartSourceFlags: registry flags that do not fit the chart given are usage errors
// (exit 2) naming the flag; a .tgz works wherever a chart directory does; an unreachable
// registry is an error naming the reference, before any cluster is needed.
func TestChartSourceFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"version of the embedded chart": {"render", "--version", "2.15.1"},
		"CA file for a directory":       {"render", "--chart", "../../charts/polyaxon", "--ca-file", "ca.pem"},
		"plain HTTP with a CA":          {"install", "--chart", "oci://h/c/polyaxon", "--plain-http", "--ca-file", "ca.pem"},
		"cert without key":              {"upgrade", "--chart", "oci://h/c/polyaxon", "--cert-file", "c.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, nil, args...)
			assert.Equal(t, ExitUsage, r.code, r.stderr)
			assert.Regexp(t, `--(version|ca-file|plain-http|cert-file)`, r.stderr)
		})
	}

	t.Run("a .tgz", func(t *testing.T) {
		ch, err := loader.LoadDir("../../charts/polyaxon")
		require.NoError(t, err)
		archive, err := chartutil.Save(ch, t.TempDir())
		require.NoError(t, err)
		r := runCLI(t, nil, "version", "--chart", archive, "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"chartSource": "`+archive+`"`)
	})

	t.Run("unreachable registry", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		ref := "oci://" + addr + "/charts/polyaxon"
		r := runCLI(t, nil, "install", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--chart", ref, "--version", "1.2.3", "--plain-http")
		assert.Equal(t, ExitError, r.code, r.stderr)
		assert.Contains(t, r.stderr, "chart "+ref+" version 1.2.3")
		assert.NotContains(t, r.stderr, "kubeconfig", "the chart fails first, before the cluster is asked anything")
	})
}
