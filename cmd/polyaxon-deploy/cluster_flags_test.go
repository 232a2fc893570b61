package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestEveryCommandTakesTheClusterFlags runs every command and subcommand with the cluster flags
// (before and after its arguments): none rejects them as a usage error. Commands that need a
// cluster use them (the error names the kubeconfig given); the others ignore them and succeed.
func TestEveryCommandTakesTheClusterFlags(t *testing.T) {
	backups := t.TempDir()
	// Arguments each command needs; the cluster-free ones must then succeed.
	args := map[string][]string{
		"render":         {"--values-only"},
		"backup list":    {"--dir", backups},
		"backup prune":   {"--dir", backups, "--keep-last", "1"},
		"backup verify":  {backups + "/no-such-backup"},
		"restore":        {backups + "/no-such-backup", "--yes"},
		"completion":     {"bash"},
		"check":          {"--pre"},
		"plan":           {"--no-release"},
		"uninstall":      {"--yes"},
		"recover":        {"--yes"},
		"upgrade":        {"--skip-backup", "--yes"},
		"version":        nil,
		"backup":         nil,
		"install":        nil,
		"status":         nil,
		"history":        nil,
		"rollback":       nil,
		"convert-values": {"../../installer/convert/testdata/official-values-example.yaml"},
		"adopt":          {"--from-release", "plx"},
		"exporter":       {"--listen", "127.0.0.1:0"},
	}
	clusterFree := map[string]bool{"render": true, "backup list": true, "backup prune": true, "completion": true, "version": true, "convert-values": true}
	cluster := []string{"--kubeconfig", "/nonexistent/kubeconfig", "--context", "no-such-context", "-n", "elsewhere",
		"--server", "https://127.0.0.1:1", "--as", "alice", "--as-group", "ml-admins", "--as-group", "auditors",
		"--request-timeout", "5s", "--kube-insecure-skip-tls-verify", "--token", "t", "--user", "u", "--cluster", "c"}

	var walk func(prefix string, cmds []*cli.Command)
	seen := 0
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := strings.TrimSpace(prefix + " " + cmd.Name)
			walk(name, cmd.Subcommands)
			seen++
			extra, ok := args[name]
			if !ok {
				t.Errorf("command %q has no entry in this test: add the arguments it needs", name)
				continue
			}
			for _, placement := range []string{"before", "after"} {
				t.Run(name+" flags "+placement+" args", func(t *testing.T) {
					full := append(strings.Fields(name), cluster...)
					full = append(full, extra...)
					if placement == "after" {
						full = append(append(strings.Fields(name), extra...), cluster...)
					}
					r := runCLI(t, nil, full...)
					assert.NotContains(t, r.stderr, "flag provided but not defined")
					assert.NotEqual(t, ExitUsage, r.code, "usage error:\n%s", r.stderr)
					if clusterFree[name] {
						assert.Equal(t, ExitOK, r.code, "the cluster flags are ignored:\n%s", r.stderr)
						return
					}
					if !strings.Contains(name, "backup verify") && name != "restore" {
						assert.Contains(t, r.stdout+r.stderr, "/nonexistent/kubeconfig", "the command used --kubeconfig")
					}
				})
			}
		}
	}
	walk("", commands())
	assert.Greater(t, seen, 14)
}

// kubectl's flags reach the API server from a command, Helm's requests included: `history`
// reads the release through the Helm SDK, on the server given by --server with the token and
// the impersonation given, and no kubeconfig entry.
func TestKubectlFlagsReachTheServer(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"SecretList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	kubeconfig := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\n")
	r := runCLI(t, nil, "history", "--kubeconfig", kubeconfig, "-n", "ml", "--server", srv.URL, "--kube-insecure-skip-tls-verify",
		"--token", "token-of-a-robot", "--as", "alice", "--as-group", "ml-admins", "--request-timeout", "20s")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmptyf(t, seen, "no request reached the server: %s", r.stderr)
	for _, h := range seen {
		assert.Equal(t, "Bearer token-of-a-robot", h.Get("Authorization"))
		assert.Equal(t, "alice", h.Get("Impersonate-User"))
		assert.Equal(t, []string{"ml-admins"}, h.Values("Impersonate-Group"))
	}
	assert.NotContains(t, r.stdout+r.stderr, "token-of-a-robot", "the token is not printed")
}
