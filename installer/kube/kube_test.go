package kube_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

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
