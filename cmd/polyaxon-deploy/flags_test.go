package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

type cliResult struct {
	code                      int
	stdout, stderr, rawStderr string
}

// runCLI runs the App in-process like main does. settings, when set, replaces the cluster
// settings (fake or test clients).
func runCLI(t *testing.T, settings *kube.Settings, args ...string) cliResult {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir()) // debug logs of failing runs land here, not in /tmp
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	if settings != nil {
		app.Metadata[envKey].(*env).newSettings = func(*cli.Context) *kube.Settings { return settings }
	}
	err := app.RunContext(context.Background(), append([]string{"polyaxon-deploy"}, args...))
	code := finish(app, err)
	// stderr as a person reads it; with -o json|yaml the binary writes events (rawStderr).
	return cliResult{code: code, stdout: out.String(), stderr: output.TextOf(errb.String()), rawStderr: errb.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestExitCodeMapping(t *testing.T) {
	assert.Equal(t, ExitOK, exitCode(nil))
	assert.Equal(t, ExitError, exitCode(assert.AnError))
	assert.Equal(t, ExitUsage, exitCode(usageErrorf("bad")))
	assert.Equal(t, ExitCheckFailed, exitCode(withExit(ExitCheckFailed, assert.AnError)))
	assert.Equal(t, ExitWarnings, exitCode(silentExit(ExitWarnings)))
	assert.Nil(t, withExit(ExitError, nil))
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"render", "--no-such-flag"},
		{"render", "-o", "xml"},
		{"render", "extra-arg"},
		{"no-such-command"},
		{"check", "--pre", "--ignore", "rbca", "--kubeconfig", "/nonexistent"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runCLI(t, nil, args...)
			assert.Equal(t, ExitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, "Error: ")
			assert.NotContains(t, r.stderr, "Debug log:", "usage errors need no debug log")
		})
	}
}

func TestDebugLogPrintedOnFailureOnly(t *testing.T) {
	r := runCLI(t, nil, "render", "--set", "gateway.replicas=two")
	require.Equal(t, ExitError, r.code)
	i := strings.Index(r.stderr, "Debug log: ")
	require.GreaterOrEqual(t, i, 0, r.stderr)
	path := strings.TrimSpace(r.stderr[i+len("Debug log: "):])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	_ = os.Remove(path)
	assert.Contains(t, string(data), "command render")

	explicit := filepath.Join(t.TempDir(), "debug.log")
	r = runCLI(t, nil, "render", "--profile", "development", "--debug-log", explicit)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "Debug log:")
	data, err = os.ReadFile(explicit)
	require.NoError(t, err, "--debug-log writes even on success")
	assert.Contains(t, string(data), "rendered")
}

func TestKubeSettingsShared(t *testing.T) {
	var got []*kube.Settings
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	app.Commands = append(app.Commands, &cli.Command{Name: "probe", Flags: clusterFlags(), Action: func(c *cli.Context) error {
		got = append(got, kubeSettings(c), kubeSettings(c))
		return nil
	}})
	kubeconfig := writeFile(t, "config", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://prod.example.com:6443"}
- name: d
  cluster: {server: "https://dev.example.com:6443"}
users: [{name: u, user: {token: t}}]
contexts:
- name: prod
  context: {cluster: c, user: u, namespace: default}
- name: dev
  context: {cluster: d, user: u}
current-context: dev
`)
	require.NoError(t, app.Run([]string{"pd", "probe", "-n", "ml", "--context", "prod", "--kubeconfig", kubeconfig}))
	require.Len(t, got, 2)
	assert.Same(t, got[0], got[1], "one settings object per command: client-go and Helm share it")
	assert.Equal(t, "ml", got[0].Namespace)
	assert.Equal(t, "prod", got[0].Context)
	assert.Equal(t, kubeconfig, got[0].Kubeconfig)
	getter := got[0].RESTClientGetter()
	ns, _, err := getter.ToRawKubeConfigLoader().Namespace()
	require.NoError(t, err)
	assert.Equal(t, "ml", ns, "the Helm SDK's getter sees -n, not the context's namespace")
	cfg, err := got[0].RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://prod.example.com:6443", cfg.Host, "--context wins over current-context")
	hcfg, err := getter.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, cfg.Host, hcfg.Host)

	bad := kube.NewSettings(kubeconfig, "staging", "ml")
	_, err = bad.RESTConfig()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "staging")
	assert.Contains(t, err.Error(), "--context")
}
