package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// TestGatewayAPIRoute (issue 41): the production profile with httpRoute on, behind a real
// Gateway API implementation: the standard channel's CRDs of the version Traefik is built
// against, and Traefik's Kubernetes Gateway provider as controller and data plane (a process
// here; cluster.StartGateway), its HTTPS listener terminating TLS with a certificate of a CA
// made at start. The chart's HTTPRoute is accepted by Traefik itself (status.parents Accepted
// and ResolvedRefs), and haupt's API answers over https through the Gateway: Traefik routes
// to the gateway Service's EndpointSlice addresses, which the cluster's pod network proxy
// takes to the gateway pod's process. A request whose body is streamed for longer than a
// short-lived request lasts stays open through it.
func TestGatewayAPIRoute(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns := nsInstall
	build := traefik.get(t)
	c := polyaxonCluster(t, "gateway", ns)
	ctx := ctxT(t, 5*time.Minute)
	require.NoError(t, c.InstallGatewayAPICRDs(ctx, build.CRDs))
	gw, err := c.StartGateway(ctx, build.Traefik, cluster.GatewayOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		gw.Stop()
		if t.Failed() {
			t.Logf("Traefik's log (%s):\n%s", gw.LogPath, lastLines(readFile(gw.LogPath), 30))
		}
	})
	createNamespace(t, c, ns)
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path="+t.TempDir(),
		"--set", "httpRoute.enabled=true",
		// The route's test: the Gateway reaches the gateway (e2e/edge_test.go puts the edge between).
		"--set", "edge.enabled=false",
		"--set", "httpRoute.parentRefs[0].name="+gw.Name,
		"--set", "httpRoute.parentRefs[0].namespace="+gw.Namespace,
		"--set", "httpRoute.parentRefs[0].sectionName="+gw.Listener,
		"--set", "httpRoute.hostnames[0]=localhost",
	).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	const route = "polyaxon-gateway"
	t.Run("Traefik accepts the chart's HTTPRoute and resolves its backend", func(t *testing.T) {
		var status string
		defer func() { t.Logf("route %s/%s, parent %s/%s: %s", ns, route, gw.Namespace, gw.Name, status) }()
		waitFor(t, time.Minute, "route "+route+" Accepted and ResolvedRefs", func(ctx context.Context) (bool, string, error) {
			r, err := dyn.Resource(cluster.HTTPRoutesGVR).Namespace(ns).Get(ctx, route, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			// Conditions of the route's current generation only: Traefik's verdict on what
			// the chart last wrote.
			got := []string{fmt.Sprintf("generation %d", r.GetGeneration())}
			ok := true
			for _, typ := range []string{"Accepted", "ResolvedRefs"} {
				cond := cluster.RouteParentCondition(r, cluster.GatewayControllerName, gw.Namespace, gw.Name, typ)
				got = append(got, fmt.Sprintf("%s=%v (%v: %v; observedGeneration %v)", typ, cond["status"], cond["reason"], cond["message"], cond["observedGeneration"]))
				ok = ok && cond != nil && cond["status"] == "True" && cond["observedGeneration"] == r.GetGeneration()
			}
			status = strings.Join(got, ", ")
			return ok, status, nil
		})
	})

	client := gw.Client()
	t.Run("haupt's API answers over https through the Gateway", func(t *testing.T) {
		var installation struct {
			Version string `json:"version"`
			Dist    string `json:"dist"`
		}
		var last string
		waitFor(t, time.Minute, "GET "+gw.URL()+"/api/v1/installation", func(ctx context.Context) (bool, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/api/v1/installation", nil)
			if err != nil {
				return false, "", err
			}
			resp, err := client.Do(req)
			if err != nil {
				return false, err.Error(), nil
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			last = fmt.Sprintf("%s %s", resp.Status, body)
			if resp.StatusCode != http.StatusOK {
				return false, last, nil
			}
			require.NotNil(t, resp.TLS, "the answer came over TLS")
			require.NotEmpty(t, resp.TLS.PeerCertificates)
			assert.Equal(t, []string{"localhost"}, resp.TLS.PeerCertificates[0].DNSNames, "the Gateway's certificate")
			return true, last, json.Unmarshal(body, &installation)
		})
		t.Logf("GET %s/api/v1/installation: %s", gw.URL(), last)
		assert.Equal(t, installedVersion(t), installation.Version, "haupt of the chart's appVersion answers behind the Gateway")
		assert.Equal(t, "ce", installation.Dist)
	})

	t.Run("the UI answers at /ui/ through the Gateway", func(t *testing.T) {
		resp, err := client.Get(gw.URL() + "/ui/")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equalf(t, http.StatusOK, resp.StatusCode, "%s", lastLines(string(body), 5))
		assert.Contains(t, strings.ToLower(string(body)), "<html", "haupt's UI page")
	})

	t.Run("the web UI in headless Chromium, over https through the Gateway", func(t *testing.T) {
		// A project created through the Gateway, which the UI then lists.
		const project = "through-gateway"
		resp, err := client.Post(gw.URL()+"/api/v1/default/projects/create", "application/json", strings.NewReader(`{"name": "`+project+`"}`))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equalf(t, http.StatusCreated, resp.StatusCode, "create project %s through the Gateway: %s", project, body)
		// Chromium trusts the Gateway's certificate by its public key, and no other: a page
		// served with any other certificate fails to load, and the test with it.
		browser := headlessChromiumTrusting(t, resp.TLS.PeerCertificates[0])
		page := openWebUI(t, browser, gw.URL()+"/ui/orgs/default/projects", 3*time.Minute, []string{project}, []string{"/ui/default/" + project})
		t.Logf("%s/ui/orgs/default/projects in headless Chromium shows: %q", gw.URL(), lastLines(page.Text, 8))
	})

	t.Run("a request streamed for 15 s stays open through the Gateway", func(t *testing.T) {
		// A chunked body written a chunk a second: Traefik forwards it as it comes (it does
		// not buffer request bodies), and Django's ASGI handler reads the whole body before it
		// answers, so haupt's answer comes after the last chunk, on the one connection.
		const chunks = 15
		pr, pw := io.Pipe()
		go func() {
			for i := range chunks {
				if _, err := fmt.Fprintf(pw, `{"chunk": %d}`+"\n", i); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
			pw.Close()
		}()
		req, err := http.NewRequestWithContext(ctxT(t, time.Minute), http.MethodPost, gw.URL()+"/api/v1/installation", pr)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		elapsed := time.Since(start)
		t.Logf("POST (chunked, %d s) %s/api/v1/installation: %s %s after %s", chunks, gw.URL(), resp.Status, body, elapsed.Round(100*time.Millisecond))
		assert.GreaterOrEqual(t, elapsed, time.Duration(chunks-1)*time.Second, "the answer came before the body was sent")
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "haupt's own answer to a POST of the installation")
		assert.Contains(t, string(body), "POST", "haupt's JSON names the method")
	})
}

func readFile(path string) string {
	b, _ := os.ReadFile(filepath.Clean(path))
	return string(b)
}
