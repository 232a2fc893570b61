package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// What a user who wants the platform's secrets sends to Polyaxon's own HTTP routes: the
// streams routes with the run's uuid spelt to leave the artifacts store, links in a run's
// outputs to the files that hold the platform's secrets, and the routes that mint tokens or
// exec rights. Each is sent as written (a raw request line: no client normalises it).

// hostileRequest is one request a run, or a user through the edge, can send to the gateway.
type hostileRequest struct {
	name, method, target string
	header               map[string]string
	// refused: the proxy must answer 4xx; otherwise only no secret may appear in the answer.
	refused bool
}

// traversalSpellings are the run uuid of a streams route spelt to name the store's parent.
var traversalSpellings = map[string]string{
	"dot-dot":                 "..",
	"encoded dot-dot":         "%2E%2E",
	"lower-case encoded":      "%2e%2e",
	"double-encoded dot-dot":  "%252E%252E",
	"dot-dot, encoded slash":  "..%2F..%2F..",
	"encoded slash":           "x%2F..%2F..",
	"backslash":               `..\..`,
	"encoded backslash":       "..%5C..",
	"overlong UTF-8 dot-dot":  "%C0%AE%C0%AE",
	"overlong UTF-8 slash":    "..%C0%AF..",
	"mixed dot and encoded":   ".%2E",
	"dot segment, parameters": "..;",
}

// hostileRequests for a run of project owner/project in runsNS, the platform being in ns.
func hostileRequests(ns, runsNS, owner, project, run string) []hostileRequest {
	streams := fmt.Sprintf("/streams/v1/%s/%s/%s/runs/", runsNS, owner, project)
	var out []hostileRequest
	for what, uuid := range traversalSpellings {
		for _, route := range []string{"artifacts/tree", "artifact?path=postgres-password&stream=true", "ro_artifact/proc/self/environ"} {
			out = append(out, hostileRequest{name: what + " in the run uuid, " + strings.SplitN(route, "?", 2)[0], method: http.MethodGet, target: streams + uuid + "/" + route, refused: true})
		}
	}
	exec := fmt.Sprintf("/k8s/v1/%s/%s/%s/runs/%s/k8s_exec/plx-operation-%s/polyaxon-main?command=env", runsNS, owner, project, run, run)
	out = append(out,
		hostileRequest{name: "the auth request, forged for an exec", method: http.MethodGet, target: "/auth-request/v1/",
			header: map[string]string{"X-Origin-URI": exec, "X-Origin-Method": "GET"}, refused: true},
		hostileRequest{name: "an exec into a run's pod", method: http.MethodGet, target: exec, refused: true},
		hostileRequest{name: "an exec naming the platform's namespace", method: http.MethodGet,
			target: fmt.Sprintf("/k8s/v1/%s/%s/%s/runs/%s/k8s_exec/polyaxon-gateway/gateway?command=env", ns, owner, project, run), refused: true},
		hostileRequest{name: "the internal logs route without the token", method: http.MethodPost,
			target: fmt.Sprintf("/internal/v1/%s/%s/%s/runs/%s/job/logs", runsNS, owner, project, run), refused: true},
		hostileRequest{name: "the internal logs route with Polyaxon's default token", method: http.MethodPost,
			target: fmt.Sprintf("/internal/v1/%s/%s/%s/runs/%s/job/logs", runsNS, owner, project, run),
			header: map[string]string{"Authorization": "InternalToken default-secret", "X-POLYAXON-INTERNAL": "operator"}, refused: true},
		hostileRequest{name: "streams' logs naming the platform's namespace", method: http.MethodGet,
			target: fmt.Sprintf("/streams/v1/%s/%s/%s/runs/%s/logs", ns, owner, project, run)},
		hostileRequest{name: "streams' Kubernetes resources naming the platform's namespace", method: http.MethodGet,
			target: fmt.Sprintf("/streams/v1/%s/%s/%s/runs/%s/k8s_resources", ns, owner, project, run)},
		hostileRequest{name: "a path outside the store in the query", method: http.MethodGet,
			target: streams + run + "/artifact?path=../../../../proc/self/environ&stream=true"},
	)
	// Streams follows no link under the store (the chart's files/store-guard.py): each is
	// not found.
	for _, link := range hostileLinks {
		out = append(out,
			hostileRequest{name: "link " + link.name + ", streamed", method: http.MethodGet, target: streams + run + "/artifact?path=outputs/" + link.name + "&stream=true", refused: true},
			hostileRequest{name: "link " + link.name + ", read-only route", method: http.MethodGet, target: streams + run + "/ro_artifact/outputs/" + link.name, refused: true},
			hostileRequest{name: "link " + link.name + ", downloaded", method: http.MethodGet, target: streams + run + "/artifact?path=outputs/" + link.name, refused: true},
			hostileRequest{name: "a file through link " + link.name, method: http.MethodGet, target: streams + run + "/artifact?path=outputs/" + link.name + "/x&stream=true", refused: true},
		)
	}
	out = append(out, hostileRequest{name: "the outputs with their links, as an archive", method: http.MethodGet, target: streams + run + "/artifacts?path=outputs"})
	return out
}

// hostileLinks are the links a run writes in its outputs, to the files that hold secrets in
// the gateway's containers.
var hostileLinks = []struct{ name, target string }{
	{"environ", "/proc/self/environ"},
	{"pid1-environ", "/proc/1/environ"},
	{"token", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
	{"passwd", "/etc/passwd"},
	{"etc", "/etc"},
}

// writeHostileLinks writes hostileLinks into the run's outputs in the store (runDir is
// <store>/<run uuid>), as the run's own process would.
func writeHostileLinks(t *testing.T, runDir string) {
	t.Helper()
	outputs := filepath.Join(runDir, "outputs")
	require.NoError(t, os.MkdirAll(outputs, 0o755))
	for _, l := range hostileLinks {
		p := filepath.Join(outputs, l.name)
		_ = os.Remove(p)
		require.NoError(t, os.Symlink(l.target, p))
	}
}

// platformSecretValues are the values of the platform's own Secrets in ns (passwords, the
// secret key, the internal token), the bytes that must appear in no answer.
func platformSecretValues(t *testing.T, cs kubernetes.Interface, ns string) map[string][]byte {
	t.Helper()
	list, err := cs.CoreV1().Secrets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, s := range list.Items {
		if s.Type == "helm.sh/release.v1" || s.Type == corev1.SecretTypeServiceAccountToken {
			continue
		}
		for k, v := range s.Data {
			if len(v) >= 8 { // shorter values (a user name, "true") are not secrets to look for
				out[s.Name+"/"+k] = v
			}
		}
	}
	require.NotEmpty(t, out, "no Secret values in %s", ns)
	return out
}

// rawRequest sends r to addr (host:port) as written, and returns the status and the answer
// (headers and body, at most 1 MiB).
func rawRequest(ctx context.Context, addr string, r hostileRequest) (int, []byte, error) {
	status, answer, _, err := rawRequestLocation(ctx, addr, r)
	return status, answer, err
}

// rawRequestLocation is rawRequest with the answer's Location header.
func rawRequestLocation(ctx context.Context, addr string, r hostileRequest) (int, []byte, string, error) {
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, nil, "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", r.method, r.target, addr)
	for k, v := range r.header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if r.method == http.MethodPost {
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return 0, nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	var all bytes.Buffer
	_ = resp.Header.Write(&all)
	all.WriteString("\r\n")
	_, _ = io.Copy(&all, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, all.Bytes(), resp.Header.Get("Location"), nil
}

// assertGatewayRefusesHostileRequests sends every hostile request to the gateway at addr: the
// refused ones get a 4xx, and no answer holds a byte sequence of a platform Secret's value.
// In front of the gateway, the edge (oauth2-proxy, Go's path cleaning) answers a path with dot
// segments with a redirect to the cleaned path: that one is followed, and must get the 4xx.
func assertGatewayRefusesHostileRequests(t *testing.T, addr string, reqs []hostileRequest, secrets map[string][]byte) {
	t.Helper()
	for _, r := range reqs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		status, answer, location, err := rawRequestLocation(ctx, addr, r)
		if err == nil && status >= 300 && status < 400 && location != "" {
			first := status
			followed := r
			if u, perr := url.Parse(location); perr == nil {
				followed.target = u.RequestURI()
			}
			status, answer, err = rawRequest(ctx, addr, followed)
			t.Logf("%-60s %d, redirected to %s", r.name, first, followed.target)
		}
		cancel()
		if !assert.NoErrorf(t, err, "%s: %s %s", r.name, r.method, r.target) {
			continue
		}
		judgeHostileAnswer(t, r, status, answer, secrets)
	}
}

// judgeHostileAnswer: a refused request got a 4xx, and no answer holds a Secret's value.
func judgeHostileAnswer(t *testing.T, r hostileRequest, status int, answer []byte, secrets map[string][]byte) {
	t.Helper()
	t.Logf("%-60s %d  %s %s", r.name, status, r.method, r.target)
	if r.refused {
		assert.Truef(t, status >= 400 && status < 500, "%s: %s %s answered %d, want a refusal (4xx):\n%.300s", r.name, r.method, r.target, status, answer)
	} else {
		assert.NotZerof(t, status, "%s: no answer: %s", r.name, answer)
	}
	for name, v := range secrets {
		assert.Falsef(t, bytes.Contains(answer, v), "%s: %s %s: the answer holds the value of Secret %s", r.name, r.method, r.target, name)
	}
}

// hostileFromAPod is the program a run pod runs to send hostile requests (JSON: a list of
// [method, target, {header: value}]) to the gateway at host:port, as written: for each, one
// line `i status base64(answer)` (the answer's headers and at most 256 KiB of its body).
const hostileFromAPod = `import base64, json, socket, sys, time, urllib.request
host, port = sys.argv[1].rsplit(":", 1)
# A new pod's NetworkPolicy is programmed a moment after it starts (kube-router): wait for
# the gateway to answer first.
deadline = time.time() + 90
while True:
    try:
        urllib.request.urlopen("http://%s:%s/healthz/" % (host, port), timeout=5)
        break
    except Exception:
        if time.time() > deadline:
            break
        time.sleep(2)
for i, (method, target, headers) in enumerate(json.loads(sys.argv[2])):
    head = "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (method, target, host)
    head += "".join("%s: %s\r\n" % kv for kv in headers.items())
    if method == "POST":
        head += "Content-Length: 0\r\n"
    try:
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall((head + "\r\n").encode("latin-1"))
        answer = b""
        while len(answer) < 262144:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        s.close()
        status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "0"
    except Exception as e:
        status, answer = "0", repr(e).encode()
    print(i, status, base64.b64encode(answer).decode(), flush=True)
`

// hostileArgs is reqs as hostileFromAPod takes them.
func hostileArgs(t *testing.T, reqs []hostileRequest) string {
	t.Helper()
	var list [][]any
	for _, r := range reqs {
		h := r.header
		if h == nil {
			h = map[string]string{}
		}
		list = append(list, []any{r.method, r.target, h})
	}
	b, err := json.Marshal(list)
	require.NoError(t, err)
	return string(b)
}

// assertHostileAnswers checks hostileFromAPod's output for reqs as
// assertGatewayRefusesHostileRequests checks its own answers.
func assertHostileAnswers(t *testing.T, out string, reqs []hostileRequest, secrets map[string][]byte) {
	t.Helper()
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var i, status int
		var enc string
		if _, err := fmt.Sscanf(line, "%d %d %s", &i, &status, &enc); err != nil || i < 0 || i >= len(reqs) {
			continue
		}
		seen++
		answer, err := base64.StdEncoding.DecodeString(enc)
		require.NoError(t, err)
		judgeHostileAnswer(t, reqs[i], status, answer, secrets)
	}
	assert.Equal(t, len(reqs), seen, "every request answered:\n%s", lastLines(out, 5))
}
