package operator

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// The chart's operator ConfigMap, as the e2e provider hands it over.
func chartEnv() map[string]string {
	return map[string]string{
		"POLYAXON_K8S_NAMESPACE":        "polyaxon",
		"POLYAXON_SINGLE_NAMESPACE":     "true",
		"POLYAXON_SET_AGENT":            "true",
		"POLYAXON_LOG_LEVEL":            "INFO",
		"POLYAXON_PROXY_API_HOST":       "127.0.0.1",
		"POLYAXON_PROXY_API_PORT":       "38000",
		"POLYAXON_TFJOB_ENABLED":        "false",
		"POLYAXON_PYTORCH_JOB_ENABLED":  "true",
		"POLYAXON_MPIJOB_ENABLED":       "false",
		"POLYAXON_DASK_CLUSTER_ENABLED": "false",
		"POLYAXON_RAY_CLUSTER_ENABLED":  "true",
	}
}

func TestConfigFromTheChartsEnvironment(t *testing.T) {
	c, warnings, err := ConfigFromEnv(env(chartEnv()))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, "polyaxon", c.WatchNamespace())
	assert.True(t, c.SetAgent)
	assert.Equal(t, "http://127.0.0.1:38000", c.APIURL())
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	assert.Empty(t, c.AuthToken)
	assert.True(t, c.enabled(batchJob))
	assert.True(t, c.enabled(deployment))
	assert.True(t, c.enabled(pytorchJob))
	assert.True(t, c.enabled(rayCluster))
	assert.False(t, c.enabled(tfJob))
	assert.False(t, c.enabled(mpiJob))
	assert.False(t, c.enabled(daskCluster))
}

func TestConfigAllNamespacesAndHTTPSOn443(t *testing.T) {
	e := chartEnv()
	e["POLYAXON_SINGLE_NAMESPACE"] = "false"
	e["POLYAXON_PROXY_API_HOST"] = "polyaxon.example.com"
	e["POLYAXON_PROXY_API_PORT"] = "443"
	e["POLYAXON_AUTH_TOKEN"] = "tok"
	c, _, err := ConfigFromEnv(env(e))
	require.NoError(t, err)
	assert.Equal(t, "", c.WatchNamespace(), "every namespace")
	assert.Equal(t, "https://polyaxon.example.com:443", c.APIURL())
	assert.Equal(t, "tok", c.AuthToken)
}

func TestConfigWithoutTheAgentNeedsNoAPI(t *testing.T) {
	c, _, err := ConfigFromEnv(env(map[string]string{"POLYAXON_K8S_NAMESPACE": "ns", "POLYAXON_SINGLE_NAMESPACE": "true"}))
	require.NoError(t, err)
	assert.False(t, c.SetAgent)
	assert.False(t, c.enabled(pytorchJob), "a backend is off unless its switch says true")
}

func TestConfigErrorsNameEveryBadSetting(t *testing.T) {
	_, _, err := ConfigFromEnv(env(map[string]string{
		"POLYAXON_SINGLE_NAMESPACE":    "true",
		"POLYAXON_SET_AGENT":           "true",
		"POLYAXON_PROXY_API_PORT":      "http",
		"POLYAXON_PYTORCH_JOB_ENABLED": "yes please",
		"POLYAXON_LOG_LEVEL":           "loud",
	}))
	require.Error(t, err)
	for _, want := range []string{
		"POLYAXON_SINGLE_NAMESPACE=true needs POLYAXON_K8S_NAMESPACE",
		"POLYAXON_SET_AGENT=true needs POLYAXON_PROXY_API_HOST",
		`POLYAXON_PROXY_API_PORT="http": want a port number`,
		`POLYAXON_PYTORCH_JOB_ENABLED="yes please": want true or false`,
		`POLYAXON_LOG_LEVEL="loud"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestConfigMissingPortWithTheAgent(t *testing.T) {
	e := chartEnv()
	delete(e, "POLYAXON_PROXY_API_PORT")
	_, _, err := ConfigFromEnv(env(e))
	assert.ErrorContains(t, err, "POLYAXON_SET_AGENT=true needs POLYAXON_PROXY_API_PORT")
}

// Polyaxon 2.12 renamed the Ray switch (polyaxon/charts agent-cm.yaml); the old name is read
// by nothing, and saying so beats silently failing every Ray run.
func TestConfigWarnsOfThePre212RaySwitch(t *testing.T) {
	e := chartEnv()
	delete(e, "POLYAXON_RAY_CLUSTER_ENABLED")
	e["POLYAXON_RAY_JOB_ENABLED"] = "true"
	c, warnings, err := ConfigFromEnv(env(e))
	require.NoError(t, err)
	assert.False(t, c.enabled(rayCluster))
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "POLYAXON_RAY_JOB_ENABLED=true is read by nothing since Polyaxon 2.12: Ray clusters follow POLYAXON_RAY_CLUSTER_ENABLED")
}

func TestLogLevels(t *testing.T) {
	for in, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "WARNING": slog.LevelWarn, "CRITICAL": slog.LevelError} {
		got, err := parseLogLevel(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}
