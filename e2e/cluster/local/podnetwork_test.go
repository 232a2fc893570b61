package local

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A request for a pod IP and container port through the pod network proxy (as Traefik sends it,
// with HTTP_PROXY=socks5://...) reaches that pod's process, with the client's Host; a pod that
// is not running, another port or an unknown IP refuses the connection.
func TestPodNetworkRoutesPodIPsToTheirProcesses(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "pod a: %s %s", r.Host, r.URL.Path)
	}))
	defer backend.Close()
	pod := func(name, ip string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "polyaxon"},
			Status:     corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}
	}
	cs := fake.NewClientset(pod("a", "10.0.0.7", corev1.PodRunning), pod("b", "10.0.0.8", corev1.PodSucceeded))
	backends := newBackendTable()
	backends.set("polyaxon", "a", 8000, strings.TrimPrefix(backend.URL, "http://"))
	backends.set("polyaxon", "b", 8000, strings.TrimPrefix(backend.URL, "http://"))
	n, err := newPodNetwork(cs, backends)
	require.NoError(t, err)
	defer n.close()
	proxy, _ := url.Parse("socks5://" + n.addr)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}

	req, err := http.NewRequest(http.MethodGet, "http://10.0.0.7:8000/api/v1/version", nil)
	require.NoError(t, err)
	req.Host = "polyaxon.example"
	resp, err := client.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "pod a: polyaxon.example /api/v1/version", string(b))
	for _, target := range []string{"http://10.0.0.7:8001/", "http://10.0.0.8:8000/", "http://10.0.0.9:8000/"} {
		resp, err := client.Get(target)
		if err == nil {
			resp.Body.Close()
		}
		assert.Errorf(t, err, "%s: the connection is refused", target)
	}
}
