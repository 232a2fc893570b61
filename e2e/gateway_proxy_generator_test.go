package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// hauptLocation is a location block of the gateway config haupt's own generator writes.
var hauptLocation = regexp.MustCompile(`(?ms)^location\s+(=\s+|~\s+)?(\S+)\s*\{(.*?)^\}`)

// hauptRoutes: where each location of haupt's generated gateway config goes in the chart's
// nginx. "api" and "streams" are the upstream the request reaches; a number is nginx's own
// answer. A location haupt adds that is not here fails the test: decide where it goes.
var hauptRoutes = map[string]string{
	"/":                  "api",
	"/healthz/":          "api",
	"/api/v1/":           "api",
	"/auth/v1/":          "api",
	"/sso/":              "api",
	"/ui/":               "api",
	"/static/":           "api", // haupt serves the UI's files (WhiteNoise) where no nginx alias has them
	"/robots.txt":        "api",
	"/favicon.ico":       "api",
	"/internal/":         "api", // the operator's and the agent's log collection: haupt checks the internal token
	"/streams/":          "streams",
	"/auth-request/v1/":  "404", // internal in haupt's; in CE it checks no user and mints exec tokens
	"/k8s/":              "403", // the exec proxy with the gateway's token
	"/k8s/v1/":           "403",
	"/tmp/":              "404", // internal in haupt's too
	"/tmp/plx/archives/": "404", // internal: only X-Accel-Redirect reaches it
	// Run services: haupt takes the namespace from the URL; not routed (haupt answers 404).
	"/services/v1/":         "api",
	"/rewrite-services/v1/": "api",
	"/external/v1/":         "api",
	"/rewrite-external/v1/": "api",
	"/monitors/v1/":         "api",
	"/rewrite-monitors/v1/": "api",
	"/sandbox/v1/":          "api",
}

// TestGatewayProxyFollowsHauptsGenerator runs haupt's own generator (`haupt proxy gateway`,
// the installed version's) with the chart's proxies ConfigMap, and the chart's nginx config
// with this machine's nginx in front of two recording upstreams: each location haupt writes
// goes where hauptRoutes says, and what haupt keeps internal is not served.
func TestGatewayProxyFollowsHauptsGenerator(t *testing.T) {
	t.Parallel()
	venv, _ := polyaxonPrograms(t)
	objs := renderedObjects(t, "polyaxon", []string{"templates/gateway/configmap.yaml", "templates/gateway/proxy-configmap.yaml"})
	cms := map[string]*corev1.ConfigMap{}
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			cms[cm.Name] = cm
		}
	}
	require.Contains(t, cms, "polyaxon-proxies")
	require.Contains(t, cms, "polyaxon-gateway-proxy")

	// haupt's generator, with the environment the gateway pod gets from the proxies ConfigMap.
	dir := t.TempDir()
	gen := filepath.Join(dir, "haupt")
	require.NoError(t, os.MkdirAll(gen, 0o755))
	cmd := exec.Command(filepath.Join(venv, "bin", "haupt"), "proxy", "gateway", "--path", gen, "--root", dir)
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "POLYAXON_LOG_ROOT=" + filepath.Join(dir, "logs")}
	for k, v := range cms["polyaxon-proxies"].Data {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "haupt proxy gateway: %s", out)
	base, err := os.ReadFile(filepath.Join(gen, "polyaxon.base.conf"))
	require.NoError(t, err)

	// The chart's nginx, as the local provider runs it, before two recording upstreams.
	upstream := func(name string) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Django allows the client's Host only (ALLOWED_HOSTS), not the upstream's name.
			if r.Host == "polyaxon_api" || r.Host == "polyaxon_streams" {
				http.Error(w, "Invalid HTTP_HOST header: "+r.Host, http.StatusBadRequest)
				return
			}
			// The API knows no run of project intruder (haupt's RunEndpoint: owner, project, uuid).
			if name == "api" && strings.HasPrefix(r.URL.Path, "/api/v1/default/intruder/runs/") {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.Path)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	freePort := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	listen, runsListen := freePort(), freePort()
	confDir, tmp := filepath.Join(dir, "conf"), filepath.Join(dir, "tmp")
	for _, d := range []string{confDir, tmp, filepath.Join(dir, "home"), filepath.Join(dir, "archives")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "nginx.conf"), []byte(cms["polyaxon-gateway-proxy"].Data["nginx.conf"]), 0o644))
	argv, err := local.HostNginx(local.ProgramContainer{
		Command: []string{"nginx", "-e", "stderr", "-c", "/etc/polyaxon/proxy/nginx.conf"},
		Ports:   map[int32]int{8000: listen, 8001: upstream("api"), 8002: upstream("streams"), 8003: runsListen},
		Mounts:  map[string]string{"/etc/polyaxon/proxy": confDir, "/tmp": tmp, "/tmp/plx/archives": filepath.Join(dir, "archives")},
		Env:     []local.EnvVar{{Name: "HOME", Value: filepath.Join(dir, "home")}},
	})
	require.NoError(t, err)
	proc := &local.HostProcess{Path: argv[0], Args: argv[1:], Dir: dir, LogPath: filepath.Join(dir, "nginx.log")}
	require.NoError(t, proc.Start())
	t.Cleanup(func() { proc.Stop(5 * time.Second) })
	addr, runsAddr := fmt.Sprintf("127.0.0.1:%d", listen), fmt.Sprintf("127.0.0.1:%d", runsListen)
	for _, a := range []string{addr, runsAddr} {
		waitFor(t, 30*time.Second, "nginx listens on "+a, func(ctx context.Context) (bool, string, error) {
			c, err := net.Dial("tcp", a)
			if err != nil {
				return false, err.Error(), nil
			}
			c.Close()
			return true, "", nil
		})
	}

	locations := hauptLocation.FindAllStringSubmatch(string(base), -1)
	require.NotEmpty(t, locations, "no location in haupt's generated config:\n%s", base)
	for _, l := range locations {
		pattern, body := l[2], l[3]
		prefix := pattern
		if strings.TrimSpace(l[1]) == "~" { // a regex: its literal start names the route
			prefix = regexp.MustCompile(`^(/[a-z0-9-]+/v1/).*`).ReplaceAllString(pattern, "$1")
		}
		want, known := hauptRoutes[prefix]
		if !assert.Truef(t, known, "haupt's generator writes location %q, which the chart's nginx does not know: add it to hauptRoutes and route it", pattern) {
			continue
		}
		sample := prefix
		if strings.HasSuffix(sample, "/") && sample != "/" {
			sample += "x/y"
		}
		route := func(addr string) (string, int) {
			status, answer, err := rawRequest(context.Background(), addr, hostileRequest{method: http.MethodGet, target: sample})
			require.NoError(t, err, sample)
			if status != http.StatusOK {
				return fmt.Sprint(status), status
			}
			return strings.SplitN(string(answerBody(answer)), " ", 2)[0], status
		}
		got, status := route(addr)
		internal := strings.Contains(body, "internal;")
		// The runs' port serves the API (and its health, exactly /healthz/: below) only.
		runsWant := "403"
		if prefix == "/api/v1/" {
			runsWant = "api"
		}
		runsGot, _ := route(runsAddr)
		t.Logf("haupt: location %-60s internal=%-5v  chart: GET %-28s -> %s, on the runs' port %s", pattern, internal, sample, got, runsGot)
		assert.Equalf(t, want, got, "GET %s (haupt's location %q)", sample, pattern)
		assert.Equalf(t, runsWant, runsGot, "GET %s on the runs' port (haupt's location %q)", sample, pattern)
		if internal {
			assert.Truef(t, status == http.StatusNotFound, "haupt keeps %q internal; the chart answers %d", pattern, status)
		}
	}
	assertStreamsRoutesCheckTheProject(t, addr)
	assertRunsPortServesNoRunsFiles(t, runsAddr)
}

// The runs' port: no streams route of any run, of the run's own project or another's, single
// or multi; the agent's two calls (POST) pass to the API, and nothing else of the agent's.
func assertRunsPortServesNoRunsFiles(t *testing.T, addr string) {
	const run = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		method, target string
		status         int
		answer         string
	}{
		{http.MethodGet, "/streams/v1/runs-ns/default/vision/runs/" + run + "/artifact?path=outputs/model.txt", http.StatusForbidden, ""},
		{http.MethodGet, "/streams/v1/runs-ns/default/intruder/runs/" + run + "/artifacts/tree", http.StatusForbidden, ""},
		{http.MethodHead, "/streams/v1/runs-ns/default/vision/runs/" + run + "/logs", http.StatusForbidden, ""},
		{http.MethodPost, "/streams/v1/runs-ns/default/vision/runs/" + run + "/artifacts/upload", http.StatusForbidden, ""},
		{http.MethodGet, "/streams/v1/runs-ns/default/vision/runs/multi/events/metric?runs=" + run, http.StatusForbidden, ""},
		{http.MethodPost, "/internal/v1/runs-ns/default/vision/runs/" + run + "/logs/collect", http.StatusForbidden, ""},
		{http.MethodGet, "/streams/v1/runs-ns/default/agents/" + run + "/k8s_inspect", http.StatusForbidden, ""},
		{http.MethodPost, "/streams/v1/runs-ns/default/agents/" + run + "/k8s_restart", http.StatusForbidden, ""},
		{http.MethodGet, "/streams/v1/runs-ns/default/agents/" + run + "/connections_check", http.StatusForbidden, ""},
		{http.MethodGet, "/healthz/", http.StatusOK, "api GET /healthz/"},
		{http.MethodGet, "/api/v1/default/vision/runs/" + run + "/", http.StatusOK, "api GET /api/v1/default/vision/runs/" + run + "/"},
		{http.MethodPost, "/api/v1/default/vision/runs/" + run + "/statuses", http.StatusOK, "api POST /api/v1/default/vision/runs/" + run + "/statuses"},
		{http.MethodPost, "/streams/v1/runs-ns/default/agents/" + run + "/connections_check", http.StatusOK, "api POST /streams/v1/runs-ns/default/agents/" + run + "/connections_check"},
		{http.MethodPost, "/internal/v1/runs-ns/default/agents/" + run + "/collect", http.StatusOK, "api POST /internal/v1/runs-ns/default/agents/" + run + "/collect"},
		{http.MethodGet, "/api/v1/../streams/v1/runs-ns/default/vision/runs/" + run + "/artifact", http.StatusBadRequest, ""},
		{http.MethodGet, "/api/v1/%2e%2e/streams/v1/runs-ns/default/vision/runs/" + run + "/artifact", http.StatusBadRequest, ""},
	} {
		status, answer, err := rawRequest(context.Background(), addr, hostileRequest{method: c.method, target: c.target})
		require.NoError(t, err, c.target)
		assert.Equalf(t, c.status, status, "runs' port: %s %s: %s", c.method, c.target, answer)
		if c.answer != "" {
			assert.Equalf(t, c.answer, string(answerBody(answer)), "runs' port: %s %s", c.method, c.target)
		}
	}
}

// The chart's own check: a streams route of one run is read only when the API finds the run
// in the URL's project; multi-run routes are passed as they are.
func assertStreamsRoutesCheckTheProject(t *testing.T, addr string) {
	const run = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		method, target string
		status         int
		answer         string
	}{
		{http.MethodGet, "/streams/v1/runs-ns/default/vision/runs/" + run + "/artifact?path=outputs/model.txt", http.StatusOK, "streams GET /streams/v1/runs-ns/default/vision/runs/" + run + "/artifact"},
		{http.MethodGet, "/streams/v1/runs-ns/default/intruder/runs/" + run + "/artifact?path=outputs/model.txt", http.StatusForbidden, ""},
		{http.MethodGet, "/streams/v1/runs-ns/default/intruder/runs/" + run + "/artifacts/tree", http.StatusForbidden, ""},
		{http.MethodHead, "/streams/v1/runs-ns/default/intruder/runs/" + run + "/logs", http.StatusForbidden, ""},
		{http.MethodPost, "/streams/v1/runs-ns/default/intruder/runs/" + run + "/job/logs", http.StatusForbidden, ""},
		{http.MethodPost, "/streams/v1/runs-ns/default/vision/runs/" + run + "/job/logs", http.StatusOK, "api POST /streams/v1/runs-ns/default/vision/runs/" + run + "/job/logs"},
		{http.MethodGet, "/streams/v1/runs-ns/default/intruder/runs/multi/events/metric?runs=" + run, http.StatusOK, "streams GET /streams/v1/runs-ns/default/intruder/runs/multi/events/metric"},
	} {
		status, answer, err := rawRequest(context.Background(), addr, hostileRequest{method: c.method, target: c.target})
		require.NoError(t, err, c.target)
		assert.Equalf(t, c.status, status, "%s %s: %s", c.method, c.target, answer)
		if c.answer != "" {
			assert.Equalf(t, c.answer, string(answerBody(answer)), "%s %s", c.method, c.target)
		}
	}
}

// answerBody is the body of an answer rawRequest returned (after its headers).
func answerBody(answer []byte) []byte {
	if i := strings.Index(string(answer), "\r\n\r\n"); i >= 0 {
		return answer[i+4:]
	}
	return answer
}
