package kube_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
)

func TestDefaults(t *testing.T) {
	s := kube.NewSettings("", "", "")
	assert.Equal(t, kube.DefaultNamespace, s.Namespace)
}

func TestMissingKubeconfigSaysTheFix(t *testing.T) {
	s := kube.NewSettings("/nonexistent/config", "prod", "ml")
	_, err := s.RESTConfig()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/config")
	assert.Contains(t, err.Error(), "context prod")
	assert.Contains(t, err.Error(), "fix: pass --kubeconfig")
	_, err = s.Clientset()
	require.Error(t, err, "clients report the same error")
	_, err = s.RESTMapper()
	require.Error(t, err)
}

// An injected rest.Config is used by client-go and by the Helm SDK alike.
func TestInjectedConfigSharedWithHelm(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": "v1.37.2", "major": "1", "minor": "37"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s := kube.NewSettings("", "", "ml", kube.WithRESTConfig(&rest.Config{Host: srv.URL}))
	cs, err := s.Clientset()
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", v.GitVersion)

	cfg, err := s.HelmConfig(nil)
	require.NoError(t, err)
	kc, err := cfg.RESTClientGetter.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, srv.URL, kc.Host, "Helm talks to the same API server")
}

// kubectl's other flags reach the API server as kubectl sends them: --server with
// --insecure-skip-tls-verify and no kubeconfig entry, --token as the bearer token, --as and
// --as-group as impersonation headers; and Helm's client gets the same.
func TestKubectlAccessFlags(t *testing.T) {
	var got http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": "v1.37.2", "major": "1", "minor": "37"})
	}))
	defer srv.Close()
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	s := kube.NewSettings(empty, "", "ml", kube.WithAccess(kube.Access{
		Server: srv.URL, InsecureSkipTLSVerify: true, Token: "token-of-a-robot",
		As: "alice", AsGroups: []string{"ml-admins", "auditors"}, RequestTimeout: "45s",
	}))
	cfg, err := s.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, cfg.Timeout)
	cs, err := s.Clientset()
	require.NoError(t, err)
	_, err = cs.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "Bearer token-of-a-robot", got.Get("Authorization"))
	assert.Equal(t, "alice", got.Get("Impersonate-User"))
	assert.Equal(t, []string{"ml-admins", "auditors"}, got.Values("Impersonate-Group"))

	helm, err := s.HelmConfig(nil)
	require.NoError(t, err)
	hc, err := helm.RESTClientGetter.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, srv.URL, hc.Host)
	assert.Equal(t, "alice", hc.Impersonate.UserName, "Helm acts as the same user")
}

// A wrong --request-timeout is refused before any request (the command refuses it earlier, as
// a usage error naming the flag).
func TestBadRequestTimeoutRefused(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	s := kube.NewSettings(empty, "", "ml", kube.WithAccess(kube.Access{Server: "https://127.0.0.1:1", RequestTimeout: "soon"}))
	_, err := s.RESTConfig()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Invalid timeout value")
	assert.Contains(t, err.Error(), `--request-timeout "soon"`)
}

// KUBECONFIG may list several files, merged as kubectl merges them: a context of the second
// file is found.
func TestKubeconfigList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters: [{name: `+name+`, cluster: {server: "`+server+`"}}]
users: [{name: `+name+`, user: {token: t}}]
contexts: [{name: `+name+`, context: {cluster: `+name+`, user: `+name+`}}]
current-context: `+name+`
`), 0o600))
		return p
	}
	first, second := write("first", "https://first.example:6443"), write("second", "https://second.example:6443")
	t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+second)
	cfg, err := kube.NewSettings("", "second", "ml").RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://second.example:6443", cfg.Host)
	cfg, err = kube.NewSettings("", "", "ml").RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://first.example:6443", cfg.Host, "the first file's current context")
}
