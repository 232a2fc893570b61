package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// renderValues runs `render --values-only` with args and returns the merged values.
func renderValues(t *testing.T, args ...string) map[string]any {
	t.Helper()
	r := runCLI(t, nil, append([]string{"render", "--values-only", "--profile", "development"}, args...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var vals map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &vals))
	return vals
}

// --set, --set-string, --set-file and -f reach Helm's strvals parser whole, as with helm:
// no comma splitting before it.
func TestSetFlagsParseLikeHelm(t *testing.T) {
	t.Run("list", func(t *testing.T) {
		vals := renderValues(t, "--set", "allowedHosts={a.example.com,b.example.com}")
		assert.Equal(t, []any{"a.example.com", "b.example.com"}, vals["allowedHosts"])
	})
	t.Run("escaped comma is kept", func(t *testing.T) {
		vals := renderValues(t, "--set", `timeZone=Europe/Paris\,x`)
		assert.Equal(t, "Europe/Paris,x", vals["timeZone"])
	})
	t.Run("several pairs in one --set", func(t *testing.T) {
		vals := renderValues(t, "--set", "logLevel=DEBUG,timeZone=UTC")
		assert.Equal(t, "DEBUG", vals["logLevel"])
		assert.Equal(t, "UTC", vals["timeZone"])
	})
	t.Run("set-string list and escaped comma", func(t *testing.T) {
		vals := renderValues(t, "--set-string", `allowedHosts={1,2}`, "--set-string", `timeZone=a\,b`)
		assert.Equal(t, []any{"1", "2"}, vals["allowedHosts"])
		assert.Equal(t, "a,b", vals["timeZone"])
	})
	t.Run("set-file: two pairs and a path with an escaped comma", func(t *testing.T) {
		zone := writeFile(t, "zone,name.txt", "Asia/Tokyo")
		level := writeFile(t, "level.txt", "ERROR")
		vals := renderValues(t, "--set-file", `timeZone=`+strings.ReplaceAll(zone, ",", `\,`)+",logLevel="+level)
		assert.Equal(t, "Asia/Tokyo", vals["timeZone"])
		assert.Equal(t, "ERROR", vals["logLevel"])
	})
	t.Run("values file whose path has a comma", func(t *testing.T) {
		f := writeFile(t, "a,b.yaml", "logLevel: WARNING\n")
		vals := renderValues(t, "-f", f)
		assert.Equal(t, "WARNING", vals["logLevel"])
	})
}

// An empty --set, or one without a key, is a usage error (exit 2), as the argument cannot mean
// anything; nothing is rendered.
func TestEmptySetIsAUsageError(t *testing.T) {
	for _, tc := range []struct{ flag, arg string }{
		{"--set", ""}, {"--set", "=x"}, {"--set-string", ""}, {"--set-string", "=x"}, {"--set-file", ""}, {"--set-file", "=x"},
		{"--set", "logLevel=INFO,=x"},
	} {
		t.Run(tc.flag+" "+tc.arg, func(t *testing.T) {
			r := runCLI(t, nil, "render", tc.flag, tc.arg)
			assert.Equal(t, ExitUsage, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.flag)
		})
	}
}

func TestRedactArgsForTheDebugLog(t *testing.T) {
	got := redactArgs([]string{"polyaxon-deploy", "render", "--set", "postgresql.auth.password=hunter22,logLevel=INFO",
		"--set-string=secrets.secretKey=k3y", "-f", "password.yaml", "--set", "timeZone=UTC"})
	assert.Equal(t, []string{"polyaxon-deploy", "render", "--set", "postgresql.auth.password=<redacted>,logLevel=INFO",
		"--set-string=secrets.secretKey=<redacted>", "-f", "password.yaml", "--set", "timeZone=UTC"}, got)
}
