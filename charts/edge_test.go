package charts_test

import (
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The authenticating edge (issue 42): oauth2-proxy in front of the gateway.

// oidcEdge is a complete OIDC setting of the edge.
func oidcEdge(extra map[string]any) map[string]any {
	oidc := map[string]any{"issuerURL": "https://login.example.com/realms/ml", "clientID": "polyaxon",
		"clientSecret": map[string]any{"name": "polyaxon-oidc"}, "emailDomains": []any{"example.com"}, "allowedGroups": []any{"ml-team"}}
	for k, v := range extra {
		oidc[k] = v
	}
	return map[string]any{"edge": map[string]any{"oidc": oidc}}
}

var withIngress = map[string]any{"ingress": map[string]any{"enabled": true, "host": "polyaxon.example.com"}}

func edgeDeployment(t testing.TB, r rendered) appsv1.Deployment {
	t.Helper()
	o := r.get("Deployment", "polyaxon-edge")
	require.NotNil(t, o, "no edge Deployment")
	var d appsv1.Deployment
	decodeStrict(t, o, &d)
	return d
}

func TestEdgeInFrontOfTheGateway(t *testing.T) {
	r := render(t, profileValues(t, "production"), withIngress, oidcEdge(nil))
	d := edgeDeployment(t, r)
	assert.EqualValues(t, 2, *d.Spec.Replicas, "the production profile's HA edge")
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "quay.io/oauth2-proxy/oauth2-proxy:v7.15.6", c.Image, "the pinned image production pulls")
	args := strings.Join(c.Args, " ")
	for _, want := range []string{
		"--provider=oidc",
		"--oidc-issuer-url=https://login.example.com/realms/ml", "--client-id=polyaxon", "--email-domain=example.com",
		"--allowed-group=ml-team", "--scope=openid email profile groups", "--skip-jwt-bearer-tokens=true", "--cookie-secure=true",
		"--skip-provider-button=true", "--pass-authorization-header=true",
	} {
		assert.Contains(t, args, want)
	}
	assert.NotContains(t, args, "secret", "no secret on the command line (ps and the pod spec show it)")
	env := map[string]*corev1.SecretKeySelector{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			assert.Equal(t, "OAUTH2_PROXY_UPSTREAMS", e.Name)
			assert.Equal(t, "http://polyaxon-gateway.polyaxon.svc.cluster.local:80/", e.Value, "the gateway Service")
			continue
		}
		env[e.Name] = e.ValueFrom.SecretKeyRef
	}
	assert.Equal(t, "polyaxon-oidc", env["OAUTH2_PROXY_CLIENT_SECRET"].Name)
	assert.Equal(t, "client-secret", env["OAUTH2_PROXY_CLIENT_SECRET"].Key)
	assert.Equal(t, "polyaxon-edge", env["OAUTH2_PROXY_COOKIE_SECRET"].Name)

	// Hardened, placed with the core category, no API token.
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, map[string]string{"polyaxon": "core"}, pod.NodeSelector)
	assert.False(t, *pod.AutomountServiceAccountToken)
	assert.NotNil(t, c.Resources.Requests.Cpu())
	assert.False(t, c.Resources.Limits.Memory().IsZero(), "a memory limit")
	assertRestricted(t, r)
	assert.NotNil(t, r.get("PodDisruptionBudget", "polyaxon-edge"))

	// The Ingress sends users to the edge.
	var ing networkingv1.Ingress
	decodeStrict(t, r.get("Ingress", "polyaxon"), &ing)
	assert.Equal(t, "polyaxon-edge", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
	svc := r.get("Service", "polyaxon-edge")
	require.NotNil(t, svc)
	var s corev1.Service
	decodeStrict(t, svc, &s)
	assert.Equal(t, "http", s.Spec.Ports[0].Name, "the port name the Ingress uses")

	// So does the HTTPRoute, every rule.
	noIngress := map[string]any{"ingress": map[string]any{"enabled": false}}
	route := renderedRoute(t, render(t, profileValues(t, "production"), noIngress, httpRouteValues(nil), oidcEdge(nil)))
	for _, rule := range route.Spec.Rules {
		assert.Equal(t, gwv1.ObjectName("polyaxon-edge"), rule.BackendRefs[0].Name)
		assert.Equal(t, gwv1.PortNumber(80), *rule.BackendRefs[0].Port)
	}
}

// Nothing exposed, nothing to stand in front of: the production profile alone renders no edge
// and needs no way to log in; without the edge the Ingress goes to the gateway as before.
func TestNoEdgeWithoutExposure(t *testing.T) {
	r := render(t, profileValues(t, "production"))
	assert.Nil(t, r.get("Deployment", "polyaxon-edge"))
	assert.Nil(t, r.get("Secret", "polyaxon-edge"))
	r = render(t, withIngress)
	assert.Nil(t, r.get("Deployment", "polyaxon-edge"))
	var ing networkingv1.Ingress
	decodeStrict(t, r.get("Ingress", "polyaxon"), &ing)
	assert.Equal(t, "polyaxon-gateway", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
}

func TestEdgeHtpasswd(t *testing.T) {
	r := render(t, withIngress, map[string]any{"edge": map[string]any{"enabled": true, "htpasswd": map[string]any{"secretName": "polyaxon-users"}}})
	d := edgeDeployment(t, r)
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	assert.Contains(t, args, "--display-htpasswd-form=true")
	var file string
	for _, e := range c.Env {
		if e.Name == "OAUTH2_PROXY_HTPASSWD_FILE" {
			file = e.Value
		}
	}
	assert.Equal(t, "/etc/oauth2-proxy/htpasswd/htpasswd", file)
	assert.NotContains(t, args, "--provider=oidc")
	for _, e := range c.Env {
		assert.NotEqual(t, "OAUTH2_PROXY_CLIENT_SECRET", e.Name)
	}
	require.Len(t, d.Spec.Template.Spec.Volumes, 1)
	assert.Equal(t, "polyaxon-users", d.Spec.Template.Spec.Volumes[0].Secret.SecretName)
	assert.Equal(t, "/etc/oauth2-proxy/htpasswd", c.VolumeMounts[0].MountPath)
	assertRestricted(t, r)
}

// An air-gapped mirror keeps the image's path.
func TestEdgeImageFromTheMirror(t *testing.T) {
	r := render(t, withIngress, oidcEdge(nil), map[string]any{"imageRegistry": "registry.internal.example.com/mirror", "edge": map[string]any{"enabled": true}})
	assert.Equal(t, "registry.internal.example.com/mirror/oauth2-proxy/oauth2-proxy:v7.15.6", edgeDeployment(t, r).Spec.Template.Spec.Containers[0].Image)
}

func TestEdgeCookieSecretKept(t *testing.T) {
	ch := loadChart(t)
	vals := mergeValues(profileValues(t, "production"), withIngress, oidcEdge(nil))
	first, err := renderWith(ch, vals, false, nil)
	require.NoError(t, err)
	cookie := secretsOf(t, first)["polyaxon-edge"]["cookie-secret"]
	require.NotEmpty(t, cookie)
	live := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "polyaxon-edge", "namespace": testNamespace}, "data": map[string]any{"cookie-secret": cookie}}}
	again, err := renderWith(ch, vals, true, clusterOf(live))
	require.NoError(t, err)
	assert.Equal(t, cookie, secretsOf(t, again)["polyaxon-edge"]["cookie-secret"], "kept on upgrade")
	assert.Equal(t, "keep", first.get("Secret", "polyaxon-edge").GetAnnotations()["helm.sh/resource-policy"])
}

func TestEdgeBadInput(t *testing.T) {
	prod := func(layers ...map[string]any) map[string]any {
		return mergeValues(append([]map[string]any{profileValues(t, "production"), withIngress}, layers...)...)
	}
	for name, c := range map[string]struct {
		vals map[string]any
		want string
	}{
		"production exposed with no way to log in": {prod(), "values: edge.enabled is true (the production profile turns it on) but no way to log in is set"},
		"a client without an issuer":               {prod(oidcEdge(map[string]any{"issuerURL": ""})), "values: edge.oidc.issuerURL is empty"},
		"an issuer without a client":               {prod(oidcEdge(map[string]any{"clientID": ""})), "values: edge.oidc.clientID is empty"},
		"no client secret":                         {prod(oidcEdge(map[string]any{"clientSecret": map[string]any{"name": ""}})), "values: edge.oidc.clientSecret.name is empty"},
		"an issuer that is no URL":                 {prod(oidcEdge(map[string]any{"issuerURL": "login.example.com"})), `values: edge.oidc.issuerURL "login.example.com" is not an issuer URL`},
		"the discovery document for the issuer": {prod(oidcEdge(map[string]any{"issuerURL": "https://login.example.com/.well-known/openid-configuration"})),
			"without /.well-known/openid-configuration"},
		"a plain-http issuer outside the cluster": {prod(oidcEdge(map[string]any{"issuerURL": "http://login.example.com"})), "is plain http"},
		"nobody said who gets in": {prod(oidcEdge(map[string]any{"emailDomains": []any{}, "allowedGroups": []any{}})),
			"values: edge.oidc.emailDomains and edge.oidc.allowedGroups are both empty"},
		"an e-mail address for a domain": {prod(oidcEdge(map[string]any{"emailDomains": []any{"ops@example.com"}})), `values: edge.oidc.emailDomains[0] "ops@example.com" is not an e-mail domain`},
		"a redirect URL elsewhere":       {prod(oidcEdge(map[string]any{"redirectURL": "https://polyaxon.example.com/"})), "the edge answers the issuer at /oauth2/callback"},
		"a cookie secret of 20":          {prod(oidcEdge(nil), map[string]any{"edge": map[string]any{"cookie": map[string]any{"secret": strings.Repeat("x", 20)}}}), "values: edge.cookie.secret is 20 characters"},
		"a flag that is no flag":         {prod(oidcEdge(nil), map[string]any{"edge": map[string]any{"extraArgs": []any{"skip-auth-route=/"}}}), "edge/extraArgs/0"},
		"a typo":                         {prod(map[string]any{"edge": map[string]any{"oidc": map[string]any{"issuerUrl": "https://x"}}}), "issuerUrl"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), c.vals, false, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// An in-cluster issuer may speak plain http.
	render(t, profileValues(t, "production"), withIngress, oidcEdge(map[string]any{"issuerURL": "http://dex.auth.svc:5556/dex"}))

	// Seen from the cluster, a client Secret that does not exist is refused.
	kubeSystem := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kube-system"}}}
	_, err := renderWith(loadChart(t), prod(oidcEdge(nil)), false, clusterOf(kubeSystem))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `edge.oidc.clientSecret.name: Secret "polyaxon-oidc" not found in namespace "polyaxon"`)
}

// edgePolicyJudge is policyJudge for a chart and any testing.TB (the mutation test's recorder).
func edgePolicyJudge(t testing.TB, ch *chart.Chart, layers ...map[string]any) (*matcher.Policy, rendered) {
	t.Helper()
	r := renderChart(t, ch, layers...)
	var policies []*networkingv1.NetworkPolicy
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	return matcher.BuildNetworkPolicies(true, policies), r
}

func labelsOf(t testing.TB, r rendered, component string) map[string]string {
	t.Helper()
	for _, p := range r.pods(t) {
		if p.component == component {
			return p.meta.Labels
		}
	}
	t.Fatalf("no %s pod in the render", component)
	return nil
}

// checkOutsideOnlyThroughTheEdge: with the edge, the ingress controller and the Gateway's
// data plane reach the edge and not the gateway; the agent, runs and the edge reach the
// gateway; the edge reaches the issuer and nothing of the dependencies.
func checkOutsideOnlyThroughTheEdge(t testing.TB, ch *chart.Chart) {
	const tcp = corev1.ProtocolTCP
	for name, layers := range map[string][]map[string]any{
		"Ingress":   {profileValues(t, "production"), withIngress, oidcEdge(nil)},
		"HTTPRoute": {profileValues(t, "production"), map[string]any{"networkPolicy": map[string]any{"ingressNamespaceSelector": nil}}, httpRouteValues(nil), oidcEdge(nil)},
	} {
		judge, r := edgePolicyJudge(t, ch, layers...)
		gateway := peer{"gateway", labelsOf(t, r, "gateway"), testNamespace, "10.0.1.1"}
		edge := peer{"edge", labelsOf(t, r, "edge"), testNamespace, "10.0.1.9"}
		agent := peer{"agent", labelsOf(t, r, "agent"), testNamespace, "10.0.1.2"}
		postgres := peer{"postgresql", labelsOf(t, r, "postgresql"), testNamespace, "10.0.2.1"}
		run := peer{"run pod", runPodLabelsAsking(t, nil), testRunsNamespace, "10.0.5.1"}
		controller := peer{"the ingress controller", map[string]string{"app": "ingress-nginx"}, "ingress-nginx", "10.0.8.1"}
		if name == "HTTPRoute" {
			controller = peer{"the Gateway's proxy", map[string]string{"app": "proxy"}, "gateway-system", "10.0.8.1"}
		}
		other := peer{"a pod of another namespace", map[string]string{"app": "x"}, "team-b", "10.0.9.1"}
		issuer := peer{name: "the issuer", ip: "198.51.100.10"}
		for _, f := range []flow{
			{controller, edge, 4180, tcp, true},
			{controller, gateway, 8000, tcp, false},
			{other, edge, 4180, tcp, false},
			{other, gateway, 8000, tcp, false},
			{edge, gateway, 8000, tcp, true},
			{agent, gateway, 8000, tcp, true},
			{run, gateway, 8000, tcp, false},
			{run, gateway, 8003, tcp, true},
			{controller, gateway, 8003, tcp, false},
			{edge, issuer, 443, tcp, true},
			{edge, postgres, 5432, tcp, false},
			{run, edge, 4180, tcp, false},
		} {
			got, table := allowed(judge, f.from, f.to, f.port, f.proto)
			assert.Equal(t, f.allowed, got, "%s: %s to %s:%d\n%s", name, f.from.name, f.to.name, f.port, table)
		}
	}
}

func TestOutsideOnlyThroughTheEdge(t *testing.T) { checkOutsideOnlyThroughTheEdge(t, loadChart(t)) }

// Break the gateway's NetworkPolicy on purpose (outside traffic admitted to it beside the edge,
// or the gateway open to all) and the check fails.
func TestEdgePolicyMutationsAreCaught(t *testing.T) {
	for _, m := range []chartMutation{
		{"the gateway admits the ingress controller beside the edge", "templates/gateway/networkpolicy.yaml",
			"    {{- if not $edge }}\n", "    {{- if true }}\n", checkOutsideOnlyThroughTheEdge},
		{"the gateway is open to all", "templates/gateway/networkpolicy.yaml",
			"  {{- if or $edge .Values.networkPolicy.ingressNamespaceSelector $dataPlanes }}", "  {{- if false }}", checkOutsideOnlyThroughTheEdge},
		{"the Ingress goes to the gateway", "templates/gateway/ingress.yaml",
			`(ternary "edge" "gateway"`, `(ternary "gateway" "gateway"`, func(t testing.TB, ch *chart.Chart) {
				r := renderChart(t, ch, withIngress, oidcEdge(nil), map[string]any{"edge": map[string]any{"enabled": true}})
				var ing networkingv1.Ingress
				decodeStrict(t, r.get("Ingress", "polyaxon"), &ing)
				assert.Equal(t, "polyaxon-edge", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
			}},
	} {
		t.Run(m.name, func(t *testing.T) {
			rec := runCheck(t, m.check, mutatedChart(t, m))
			require.Truef(t, rec.Failed(), "the mutation %q passed its check", m.name)
			t.Logf("caught: %s", condensed(rec.msgs[0]))
		})
	}
}
