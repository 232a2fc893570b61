package polyaxonkeys

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/venv is a tiny install: each file holds a read the derivation must find and a
// look-alike it must not (a write, a test, a literal outside the settings, an option in the
// database).
const fixtureVenv = "testdata/venv"

func TestDeriveFixture(t *testing.T) {
	sp, err := SitePackages(fixtureVenv)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(fixtureVenv, "lib", "python3.11", "site-packages"), sp)
	d, err := Derive(sp)
	require.NoError(t, err)

	assert.Equal(t, map[string]string{
		"ENV_KEYS_HOST":                      "POLYAXON_HOST",
		"ENV_KEYS_SERVICE":                   "POLYAXON_SERVICE",
		"ENV_KEYS_SECRET_KEY":                "POLYAXON_SECRET_KEY",
		"ENV_KEYS_PROXY_LOCAL_PORT":          "POLYAXON_PROXY_LOCAL_PORT",
		"ENV_KEYS_PROXY_GATEWAY_CONCURRENCY": "POLYAXON_PROXY_GATEWAY_CONCURRENCY",
	}, d.Constants)

	assert.Equal(t, Keys{
		"POLYAXON_HOST":                      "polyaxon/_env_vars/keys.py:2",
		"POLYAXON_SERVICE":                   "polyaxon/_env_vars/keys.py:3",
		"POLYAXON_SECRET_KEY":                "polyaxon/_env_vars/keys.py:6",
		"POLYAXON_PROXY_LOCAL_PORT":          "polyaxon/_env_vars/keys.py:9",
		"POLYAXON_PROXY_GATEWAY_CONCURRENCY": "polyaxon/_env_vars/keys.py:10",
		"POLYAXON_AGENT_RUNS_SA":             "polyaxon/_schemas/agent.py:7",
		"POLYAXON_DOCS_GEN":                  "polyaxon/cli.py:3",
		"POLYAXON_UPLOAD_SIZE_MAX":           "polyaxon/cli.py:5",
		"POLYAXON_CLI_DEBUG":                 "polyaxon/cli.py:8",
		"POLYAXON_CLI_COMPARED":              "polyaxon/cli.py:9",
	}, d.Readers[CLI], "not POLYAXON_ONLY_WRITTEN (a write), POLYAXON_ONLY_IN_TESTS, POLYAXON_NOT_ENV_KEYS")

	assert.Equal(t, Keys{
		"POLYAXON_PROXY_GATEWAY_CONCURRENCY": "haupt/cli/runners/server.py:11",
		"POLYAXON_PROXY_LOCAL_PORT":          "haupt/cli/runners/server.py:13",
		"POLYAXON_DASHBOARD_URL":             "haupt/cli/runners/server.py:14",
		"POLYAXON_ORGANIZATION_KEY":          "haupt/common/options/registry/installation.py:7",
		"POLYAXON_ORGANIZATION_PLAN":         "haupt/common/options/registry/installation.py:21",
		"POLYAXON_SERVICE":                   "haupt/common/settings/core.py:2",
		"POLYAXON_HOST":                      "haupt/schemas/platform_config.py:5",
		"POLYAXON_DB_ENGINE":                 "haupt/schemas/platform_config.py:7",
		"POLYAXON_SECRET_KEY":                "haupt/schemas/platform_config.py:10",
		"POLYAXON_SCHEMA_LITERAL":            "haupt/schemas/platform_config.py:13",
		"POLYAXON_CONFIG_MODULE":             "haupt/settings.py:1",
	}, d.Readers[Haupt], "not POLYAXON_SERVICE from os.environ[...] = (a write), POLYAXON_ORGANIZATION_NAME (stored in the database), literals outside the settings")

	assert.True(t, d.Reads(Haupt, "POLYAXON_DB_ENGINE"))
	assert.False(t, d.Reads(CLI, "POLYAXON_DB_ENGINE"))
	assert.Equal(t, []string{"POLYAXON_CONFIG_MODULE", "POLYAXON_DASHBOARD_URL"}, d.Readers[Haupt].Sorted()[:2])
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

func TestDeriveFailsOnWhatItCannotResolve(t *testing.T) {
	minimal := func() map[string]string {
		return map[string]string{
			KeysFile:                    "ENV_KEYS_HOST = \"POLYAXON_HOST\"\n",
			"haupt/schemas/platform.py": "x = Field(alias=ENV_KEYS_HOST)\n",
		}
	}
	sp := t.TempDir()
	writeTree(t, sp, minimal())
	_, err := Derive(sp)
	require.NoError(t, err)

	// A constant haupt uses that keys.py does not define: a key would go missing.
	files := minimal()
	files["haupt/schemas/sandbox.py"] = "\n\nport = Field(alias=ENV_KEYS_SANDBOX_PORT)\n"
	sp = t.TempDir()
	writeTree(t, sp, files)
	_, err = Derive(sp)
	require.ErrorContains(t, err, "haupt/schemas/sandbox.py:3: ENV_KEYS_SANDBOX_PORT")

	// keys.py without a constant, and a missing package.
	sp = t.TempDir()
	writeTree(t, sp, map[string]string{KeysFile: "# moved\n", "haupt/x.py": ""})
	_, err = Derive(sp)
	require.ErrorContains(t, err, "defines no ENV_KEYS_* constant")
	files = minimal()
	sp = t.TempDir()
	writeTree(t, sp, map[string]string{KeysFile: files[KeysFile]})
	_, err = Derive(sp)
	require.ErrorContains(t, err, "package haupt is not installed")
	require.ErrorContains(t, err, InstallHint)
	_, err = Derive(t.TempDir())
	require.ErrorContains(t, err, InstallHint)
}

func TestSitePackagesWantsACompleteInstall(t *testing.T) {
	_, err := SitePackages(filepath.Join(t.TempDir(), "polyaxon-9.9.9"))
	require.ErrorContains(t, err, "Polyaxon is not installed")
	require.ErrorContains(t, err, "run make deps")

	// Interrupted: install-polyaxon.sh writes the stamp last.
	venv := t.TempDir()
	writeTree(t, venv, map[string]string{"lib/python3.11/site-packages/" + KeysFile: ""})
	_, err = SitePackages(venv)
	require.ErrorContains(t, err, "install is incomplete")

	writeTree(t, venv, map[string]string{stampFile: "x"})
	sp, err := SitePackages(venv)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(venv, "lib", "python3.11", "site-packages"), sp)

	writeTree(t, venv, map[string]string{"lib/python3.12/site-packages/" + KeysFile: ""})
	_, err = SitePackages(venv)
	require.ErrorContains(t, err, "more than one Python")

	venv = t.TempDir()
	writeTree(t, venv, map[string]string{stampFile: "x"})
	_, err = SitePackages(venv)
	require.ErrorContains(t, err, "no lib/python3*/site-packages/polyaxon/_env_vars/keys.py")
}

func TestVenvDirFollowsInstallScript(t *testing.T) {
	t.Setenv("POLYAXON_DEPLOY_CACHE", "/cache")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	assert.Equal(t, "/cache/polyaxon-2.15.1", VenvDir("2.15.1"))
	t.Setenv("POLYAXON_DEPLOY_CACHE", "")
	assert.Equal(t, "/xdg/polyaxon-deploy/polyaxon-2.15.1", VenvDir("2.15.1"))
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	assert.Equal(t, "/home/u/.cache/polyaxon-deploy/polyaxon-2.15.1", VenvDir("2.15.1"))
}
