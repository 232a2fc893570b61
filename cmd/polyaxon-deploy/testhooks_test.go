package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kill-after-delete hook fires once, after the API server has deleted an object of the
// named resource, and on nothing else.
func TestKillAfterDelete(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/gone" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	kills := 0
	client := &http.Client{Transport: killAfterDelete("networkpolicies", func() { kills++ })(http.DefaultTransport)}
	do := func(method, path string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	do(http.MethodGet, "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/a")
	do(http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/gone")
	do(http.MethodDelete, "/api/v1/namespaces/ns/configmaps/a")
	assert.Equal(t, 0, kills, "a read, a failed delete and another resource's delete kill nothing")
	do(http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/a")
	assert.Equal(t, 1, kills)
	do(http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/b")
	assert.Equal(t, 1, kills, "once")
}
