package e2e

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/dex"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/edge"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// TestEdge (issue 42): the production profile exposed through an Ingress, with the
// authenticating edge in front (oauth2-proxy of the chart's pinned release, built from the
// module proxy and run for the edge's pods), an htpasswd Secret and an OIDC issuer (Dex, built
// from the module proxy and run here). `check --pre` refuses the htpasswd Secret missing; once
// installed, an anonymous request and the real polyaxon CLI without a credential are refused
// by the edge and create nothing; the CLI with a credential the edge accepts (Basic against the
// htpasswd file, Bearer with Dex's ID token) creates a project and a run, whose status the
// agent still reports (it reaches the gateway inside the cluster, not through the edge); a
// browser's htpasswd or OIDC login gets a session that reaches the API and the web UI, while an
// account of a domain the edge does not admit gets none; and an htpasswd Secret made wrong
// after the install leaves the edge's pods unready, with `check` saying why.
func TestEdge(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns := nsInstall
	bin := oauth2Proxy.get(t)
	c := polyaxonCluster(t, "edge", ns, local.WithHostPrograms(edge.Program(bin)))
	venv, _ := polyaxonPrograms(t)
	createNamespace(t, c, ns)

	const user, password = "alice", "a long passphrase"
	sum := sha1.Sum([]byte(password))
	htpasswd := user + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:]) + "\n"

	// The OIDC issuer: Dex, on this machine, knowing the edge's callback (the edge Service's
	// address here is known before the install) and two accounts, one of a domain the edge
	// lets in.
	edgeAddr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-edge", 80)
	require.NoError(t, err)
	member, outsider := dex.User{Email: "carol@example.com", Password: "carol's passphrase"},
		dex.User{Email: "mallory@elsewhere.example", Password: "mallory's passphrase"}
	const clientSecret = "the client's secret at Dex"
	idp, err := dex.Start(ctxT(t, time.Minute), c.Cluster, dexBuild.get(t), dex.Options{
		ClientID: "polyaxon", ClientSecret: clientSecret,
		RedirectURIs: []string{"http://" + edgeAddr + "/oauth2/callback"},
		Users:        []dex.User{member, outsider},
	})
	require.NoError(t, err)
	t.Cleanup(idp.Stop)
	_, err = c.Clientset.CoreV1().Secrets(ns).Create(ctxT(t, time.Minute), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-oidc"},
		StringData: map[string]string{"client-secret": clientSecret},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	install := []string{"--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path=" + t.TempDir(),
		"--set", "ingress.enabled=true", "--set", "ingress.host=localhost",
		"--set", "edge.htpasswd.secretName=polyaxon-users",
		"--set", "edge.oidc.issuerURL=" + idp.Issuer, "--set", "edge.oidc.clientID=polyaxon",
		"--set", "edge.oidc.clientSecret.name=polyaxon-oidc", "--set", "edge.oidc.emailDomains={example.com}",
		"--set", "edge.oidc.acceptBearerTokens=true",
		// Plain HTTP here: a Secure cookie would never come back.
		"--set", "edge.cookie.secure=false",
	}

	t.Run("check --pre refuses an htpasswd Secret that does not exist", func(t *testing.T) {
		r := c.deploy(t, append([]string{"check", "--pre"}, install...)...).requireExit(t, 3)
		assert.Contains(t, r.Stderr, `edge.htpasswd.secretName: Secret "polyaxon-users" not found in namespace "`+ns+`"`)
	})
	_, err = c.Clientset.CoreV1().Secrets(ns).Create(ctxT(t, time.Minute), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-users"},
		StringData: map[string]string{"htpasswd": htpasswd},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	r := c.deploy(t, append([]string{"install"}, install...)...).requireExit(t, 0)
	assert.Contains(t, r.Stderr, "every way in goes through the edge", "check-edge-exposure")
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)

	gatewayAddr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	edge, admin := "http://"+edgeAddr, "http://"+gatewayAddr
	ctx := ctxT(t, 12*time.Minute)
	// The administrators' way in (port-forward to the gateway): what exists, seen past the edge.
	adminCLI := newPolyaxonCLI(t, venv, admin)
	projectExists := func(name string) bool {
		var p map[string]any
		return adminCLI.get(ctx, "/api/v1/default/"+name, &p) == nil
	}

	t.Run("the edge pods are oauth2-proxy, hardened, with what they cost", func(t *testing.T) {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=edge"})
		require.NoError(t, err)
		require.Len(t, pods.Items, 2, "the production profile's two edge replicas")
		ctr := pods.Items[0].Spec.Containers[0]
		assert.Equal(t, "quay.io/oauth2-proxy/oauth2-proxy:v7.15.6", ctr.Image)
		assert.True(t, *ctr.SecurityContext.ReadOnlyRootFilesystem)
		t.Logf("edge container resources: requests %s cpu / %s memory, limit %s memory",
			ctr.Resources.Requests.Cpu(), ctr.Resources.Requests.Memory(), ctr.Resources.Limits.Memory())
		for _, p := range pods.Items {
			t.Logf("edge pod %s: %s", p.Name, processRSS(t, bin))
		}
	})

	t.Run("an anonymous request is refused by the edge and creates nothing", func(t *testing.T) {
		for _, req := range []struct {
			method, path, accept string
			want                 int
		}{
			{http.MethodGet, "/", "text/html", http.StatusForbidden}, // the sign-in page
			{http.MethodGet, "/api/v1/default/projects/list", "", http.StatusForbidden},
			{http.MethodGet, "/api/v1/default/projects/list", "application/json", http.StatusUnauthorized},
			{http.MethodPost, "/api/v1/default/projects/create", "application/json", http.StatusUnauthorized},
		} {
			var body io.Reader
			if req.method == http.MethodPost {
				body = strings.NewReader(`{"name": "anonymous"}`)
			}
			r, err := http.NewRequestWithContext(ctx, req.method, edge+req.path, body)
			require.NoError(t, err)
			if req.accept != "" {
				r.Header.Set("Accept", req.accept)
			}
			r.Header.Set("Content-Type", "application/json")
			resp, err := apiClient.Do(r)
			require.NoError(t, err)
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equalf(t, req.want, resp.StatusCode, "%s %s (Accept %q)", req.method, req.path, req.accept)
			if req.accept == "text/html" {
				assert.Contains(t, string(page), "/oauth2/sign_in", "the edge's sign-in form")
			}
			t.Logf("anonymous %s %s (Accept %q): %s", req.method, req.path, req.accept, resp.Status)
		}
		assert.False(t, projectExists("anonymous"), "nothing reached Polyaxon")
	})

	t.Run("the polyaxon CLI without a credential is refused", func(t *testing.T) {
		cli := newPolyaxonCLI(t, venv, edge)
		out, err := cli.run(ctx, "project", "create", "--name", "nocredential")
		require.Error(t, err, out)
		t.Logf("polyaxon project create without a credential:\n%s", lastLines(out, 4))
		assert.False(t, projectExists("nocredential"))
	})

	// The CLI with a credential: POLYAXON_AUTHENTICATION_TYPE=Basic and POLYAXON_AUTH_TOKEN
	// base64(user:password) make its Authorization header one the edge checks against the
	// htpasswd file (docs/authentication.md).
	withCredential := credentialCLI(t, venv, edge, "Basic", base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	var uuid string // the run the CLI with a credential submits
	t.Run("the polyaxon CLI with a credential creates a project and a run, whose status the agent reports", func(t *testing.T) {
		out, err := withCredential.run(ctx, "project", "create", "--name", "authtest")
		require.NoError(t, err, out)
		assert.True(t, projectExists("authtest"))
		root, err := cluster.RepoRoot()
		require.NoError(t, err)
		uuid = withCredential.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "authtest")
		adminCLI.waitStatus(t, ctx, "authtest", uuid, "succeeded")
	})

	// Issue 52: a user the edge lets in sends what a run would: nginx behind the edge refuses it.
	t.Run("through the edge, a logged-in user gets nothing of the platform's from the gateway's HTTP routes", func(t *testing.T) {
		require.NotEmpty(t, uuid, "the run above")
		reqs := hostileRequests(ns, nsRuns, "default", "authtest", uuid)
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
		for i := range reqs {
			h := map[string]string{"Authorization": basic}
			for k, v := range reqs[i].header {
				h[k] = v
			}
			reqs[i].header = h
		}
		assertGatewayRefusesHostileRequests(t, edgeAddr, reqs, platformSecretValues(t, c.Clientset, ns))
	})

	t.Run("the edge keeps the credential from Polyaxon, which would refuse it", func(t *testing.T) {
		// Polyaxon CE's API (Django REST framework's basic authentication) checks a Basic
		// Authorization against its own users: the edge must not pass the CLI's on.
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/api/v1/default/authtest", nil)
		require.NoError(t, err)
		r.SetBasicAuth(user, password)
		resp, err := apiClient.Do(r)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equalf(t, http.StatusForbidden, resp.StatusCode, "%s", body)
		t.Logf("the credential sent to the gateway itself: %s %s", resp.Status, body)
	})

	t.Run("a wrong password is refused", func(t *testing.T) {
		wrong := credentialCLI(t, venv, edge, "Basic", base64.StdEncoding.EncodeToString([]byte(user+":wrong")))
		out, err := wrong.run(ctx, "project", "create", "--name", "wrongpassword")
		require.Error(t, err, out)
		assert.False(t, projectExists("wrongpassword"))
	})

	t.Run("an htpasswd login on the form gets a session that reaches the API", func(t *testing.T) {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar, Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := browser.PostForm(edge+"/oauth2/sign_in", url.Values{"username": {user}, "password": {"wrong"}, "rd": {"/"}})
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a wrong password on the form")
		resp, err = browser.PostForm(edge+"/oauth2/sign_in", url.Values{"username": {user}, "password": {password}, "rd": {"/ui/"}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		assert.Equal(t, "/ui/", resp.Header.Get("Location"))
		resp, err = browser.Get(edge + "/api/v1/default/authtest")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equalf(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), `"name":"authtest"`)
		t.Logf("after the htpasswd login, GET /api/v1/default/authtest through the edge: %s", resp.Status)
	})

	t.Run("an OIDC login at the issuer gets a session that reaches the API; an account of another domain gets none", func(t *testing.T) {
		code, body := oidcLogin(t, ctx, edge, "/api/v1/default/authtest", member)
		assert.Equalf(t, http.StatusOK, code, "%s", body)
		assert.Contains(t, body, `"name":"authtest"`)
		t.Logf("after %s's login at Dex, GET /api/v1/default/authtest through the edge: %d", member.Email, code)
		code, body = oidcLogin(t, ctx, edge, "/api/v1/default/authtest", outsider)
		assert.Equalf(t, http.StatusForbidden, code, "edge.oidc.emailDomains={example.com} lets %s in: %s", outsider.Email, body)
		t.Logf("after %s's login at Dex: %d", outsider.Email, code)
	})

	t.Run("the polyaxon CLI with an ID token of the issuer (Bearer) creates a project; another domain's token is refused", func(t *testing.T) {
		token, err := idp.PasswordGrant(ctx, member.Email, member.Password)
		require.NoError(t, err)
		out, err := credentialCLI(t, venv, edge, "Bearer", token).run(ctx, "project", "create", "--name", "oidctest")
		require.NoError(t, err, out)
		assert.True(t, projectExists("oidctest"))
		token, err = idp.PasswordGrant(ctx, outsider.Email, outsider.Password)
		require.NoError(t, err)
		out, err = credentialCLI(t, venv, edge, "Bearer", token).run(ctx, "project", "create", "--name", "outsider")
		require.Error(t, err, out)
		assert.False(t, projectExists("outsider"))
		// A token whose signature the issuer's keys do not vouch for.
		head, _, _ := strings.Cut(token, ".")
		forged := head + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+idp.Issuer+`","aud":"polyaxon","email":"carol@example.com","email_verified":true,"exp":4102444800}`)) + ".c2lnbmF0dXJl"
		out, err = credentialCLI(t, venv, edge, "Bearer", forged).run(ctx, "project", "create", "--name", "forged")
		require.Error(t, err, out)
		assert.False(t, projectExists("forged"))
	})

	t.Run("after an OIDC login in a browser, the web UI shows the run", func(t *testing.T) {
		require.NotEmpty(t, uuid, "the run submitted with a credential")
		browser := headlessChromium(t)
		runs := "/ui/default/authtest/runs"
		// Dex's login form, then its consent page (oauth2-proxy asks the issuer to show it:
		// approval_prompt=force).
		signIn(t, browser, edge+"/oauth2/start?rd="+url.QueryEscape(runs), edge+runs, 2*time.Minute,
			signInForm{fill: [][2]string{{"login", member.Email}, {"password", member.Password}}, submit: `input[name="login"]`},
			signInForm{submit: `input[name="approval"][value="approve"]`})
		openWebUI(t, browser, edge+runs, 3*time.Minute, []string{"hello", uuid[:8]}, []string{runs + "/" + uuid})
	})

	t.Run("with the htpasswd Secret wrong, the edge's pods fail their readiness and check says why", func(t *testing.T) {
		// `htpasswd -nb` (without -B) writes MD5, which oauth2-proxy refuses at start.
		_, err := c.Clientset.CoreV1().Secrets(ns).Update(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-users"},
			StringData: map[string]string{"htpasswd": user + ":$apr1$Qm7sUhLr$3bxc2mM8bKZ4k0zJ8sYq51\n"},
		}, metav1.UpdateOptions{})
		require.NoError(t, err)
		// The edge's pods start again (a node drained, a rollout): they read the Secret anew.
		require.NoError(t, c.Clientset.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=edge"}))
		waitFor(t, 3*time.Minute, "the edge's new pods restarting, none ready", func(ctx context.Context) (bool, string, error) {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=edge"})
			if err != nil {
				return false, err.Error(), nil
			}
			var restarted int
			var seen []string
			for _, p := range pods.Items {
				ready := false
				for _, cond := range p.Status.Conditions {
					ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
				}
				for _, cs := range p.Status.ContainerStatuses {
					if cs.RestartCount > 0 && !ready {
						restarted++
					}
				}
				seen = append(seen, fmt.Sprintf("%s ready=%t", p.Name, ready))
			}
			return len(pods.Items) == 2 && restarted == 2, strings.Join(seen, ", "), nil
		})
		r := c.deploy(t, append([]string{"check"}, install...)...)
		assert.NotEqualf(t, 0, r.Code, "%s", r)
		out := r.Stdout + r.Stderr
		assert.Contains(t, out, `edge.htpasswd.secretName: Secret "polyaxon-users" key "htpasswd": user(s) alice are hashed with a scheme oauth2-proxy does not read`, "check-edge-secrets says why")
		assert.Contains(t, out, "polyaxon-edge", "check-workloads-ready names the edge")
		t.Logf("check with the edge's htpasswd Secret wrong:\n%s", lastLines(out, 12))
	})
}

// oidcLogin signs in at the edge as a browser would, with a new cookie jar: the edge's
// /oauth2/start sends it to the issuer (Dex), whose login form it fills in as user; the issuer
// sends it back to the edge's callback, and the edge to rd. It returns the status and body of
// the last answer.
func oidcLogin(t *testing.T, ctx context.Context, edge, rd string, user dex.User) (int, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(u string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/html")
		resp, err := browser.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, page := get(edge + "/oauth2/start?rd=" + url.QueryEscape(rd))
	m := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindStringSubmatch(page)
	require.NotNilf(t, m, "the issuer's login form, after the edge's /oauth2/start (at %s):\n%s", resp.Request.URL, page)
	action, err := resp.Request.URL.Parse(html.UnescapeString(m[1]))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, action.String(),
		strings.NewReader(url.Values{"login": {user.Email}, "password": {user.Password}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = browser.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The issuer's consent page (oauth2-proxy asks for it: approval_prompt=force): approve.
	if m := regexp.MustCompile(`name="req" value="([^"]+)"`).FindStringSubmatch(string(b)); m != nil && strings.Contains(string(b), `value="approve"`) {
		resp, err = browser.PostForm(resp.Request.URL.String(), url.Values{"req": {html.UnescapeString(m[1])}, "approval": {"approve"}})
		require.NoError(t, err)
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp.StatusCode, string(b)
}

// credentialCLI is the polyaxon CLI at host sending `Authorization: <scheme> <token>` on every
// request, through its own settings (POLYAXON_AUTHENTICATION_TYPE, POLYAXON_AUTH_TOKEN).
func credentialCLI(t *testing.T, venv, host, scheme, token string) *polyaxonCLI {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "polyaxon")
	script := fmt.Sprintf("#!/bin/sh\nexport POLYAXON_AUTHENTICATION_TYPE=%q POLYAXON_AUTH_TOKEN=%q\nexec %q \"$@\"\n",
		scheme, token, filepath.Join(venv, "bin", "polyaxon"))
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o755))
	cli := newPolyaxonCLI(t, venv, host)
	cli.bin = wrapper
	return cli
}

// processRSS reports the resident memory of this machine's processes of bin (the edge's host
// programs).
func processRSS(t *testing.T, bin string) string {
	out, err := exec.Command("ps", "-C", filepath.Base(bin), "-o", "pid=,rss=,time=").Output()
	if err != nil {
		return "ps: " + err.Error()
	}
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			parts = append(parts, fmt.Sprintf("pid %s rss %s KiB cpu %s", f[0], f[1], f[2]))
		}
	}
	return strings.Join(parts, "; ")
}
