package charts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func httpRouteValues(route map[string]any) map[string]any {
	r := map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public", "namespace": "gateway-system", "sectionName": "https"}}}
	for k, v := range route {
		r[k] = v
	}
	return map[string]any{"httpRoute": r}
}

func renderedRoute(t *testing.T, r rendered) gwv1.HTTPRoute {
	t.Helper()
	objs := r.byKind("HTTPRoute")
	require.Len(t, objs, 1)
	var route gwv1.HTTPRoute
	decodeStrict(t, objs[0], &route)
	return route
}

// noEdge turns the production profile's edge off: these tests are the route's to the gateway
// (edge_test.go puts the edge between).
var noEdge = map[string]any{"edge": map[string]any{"enabled": false}}

func TestHTTPRouteToTheGateway(t *testing.T) {
	r := render(t, profileValues(t, "production"), noEdge, httpRouteValues(map[string]any{
		"hostnames": []any{"polyaxon.example.com"}, "timeout": "60s",
		"annotations": map[string]any{"cert-manager.io/cluster-issuer": "letsencrypt"}, "labels": map[string]any{"team": "ml"}}))
	route := renderedRoute(t, r)
	assert.Equal(t, "polyaxon-gateway", route.Name)
	assert.Equal(t, testNamespace, route.Namespace)
	assert.Equal(t, "ml", route.Labels["team"])
	assert.Equal(t, "letsencrypt", route.Annotations["cert-manager.io/cluster-issuer"])
	require.Len(t, route.Spec.ParentRefs, 1)
	parent := route.Spec.ParentRefs[0]
	assert.Equal(t, gwv1.ObjectName("public"), parent.Name)
	assert.Equal(t, gwv1.Namespace("gateway-system"), *parent.Namespace)
	assert.Equal(t, gwv1.SectionName("https"), *parent.SectionName)
	assert.Equal(t, []gwv1.Hostname{"polyaxon.example.com"}, route.Spec.Hostnames)

	require.Len(t, route.Spec.Rules, 2)
	streams, rest := route.Spec.Rules[0], route.Spec.Rules[1]
	var prefixes []string
	for _, m := range streams.Matches {
		prefixes = append(prefixes, *m.Path.Value)
	}
	assert.Equal(t, []string{"/streams/", "/services/", "/rewrite-services/", "/external/", "/rewrite-external/"}, prefixes,
		"what stays open while a user watches it")
	assert.Equal(t, gwv1.Duration("0s"), *streams.Timeouts.Request, "no request timeout on streams and proxied services")
	assert.Equal(t, "/", *rest.Matches[0].Path.Value)
	assert.Equal(t, gwv1.Duration("60s"), *rest.Timeouts.Request)
	for _, rule := range route.Spec.Rules {
		require.Len(t, rule.BackendRefs, 1)
		assert.Equal(t, gwv1.ObjectName("polyaxon-gateway"), rule.BackendRefs[0].Name, "the gateway Service")
		assert.Equal(t, gwv1.PortNumber(80), *rule.BackendRefs[0].Port)
	}
	assert.NotNil(t, r.get("Service", "polyaxon-gateway"))

	// Without a timeout of its own the rest keeps the Gateway's.
	assert.Nil(t, renderedRoute(t, render(t, httpRouteValues(nil))).Spec.Rules[1].Timeouts)
}

func TestHTTPRouteBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		vals map[string]any
		want string
	}{
		"no parent": {map[string]any{"httpRoute": map[string]any{"enabled": true}},
			"values: httpRoute.enabled is true but httpRoute.parentRefs is empty: name the Gateway to attach to"},
		"an Ingress for every host beside it": {mergeValues(httpRouteValues(map[string]any{"hostnames": []any{"polyaxon.example.com"}}), map[string]any{"ingress": map[string]any{"enabled": true}}),
			`values: ingress.enabled and httpRoute.enabled both answer host "*"`},
		"an Ingress for a host the route's wildcard answers": {mergeValues(httpRouteValues(map[string]any{"hostnames": []any{"*.example.com"}}), map[string]any{"ingress": map[string]any{"enabled": true, "host": "polyaxon.example.com"}}),
			`both answer host "polyaxon.example.com"`},
		"a timeout that is no duration": {httpRouteValues(map[string]any{"timeout": "a minute"}), "httpRoute/timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), c.vals, false, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// An Ingress for another host may stay.
	render(t, mergeValues(httpRouteValues(map[string]any{"hostnames": []any{"polyaxon.example.com"}}), map[string]any{"ingress": map[string]any{"enabled": true, "host": "old.example.com"}}))
}

// With an HTTPRoute, the gateway admits the Gateway's data plane from outside its namespace,
// and no one else.
func TestGatewayNetworkPolicyAdmitsTheDataPlane(t *testing.T) {
	const tcp = corev1.ProtocolTCP
	noIngress := map[string]any{"networkPolicy": map[string]any{"ingressNamespaceSelector": nil}}
	judge, r := policyJudge(t, profileValues(t, "production"), noEdge, noIngress, httpRouteValues(nil))
	gateway := peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
	proxy := peer{"the Gateway's proxy", map[string]string{"app": "proxy"}, "gateway-system", "10.0.8.1"}
	other := peer{"a pod of another namespace", map[string]string{"app": "x"}, "team-b", "10.0.9.1"}
	judgeFlows(t, judge, []flow{
		{proxy, gateway, 8000, tcp, true},
		{other, gateway, 8000, tcp, false},
		{peer{name: "an address outside the cluster", ip: "203.0.113.7"}, gateway, 8000, tcp, false},
	})
	// Envoy Gateway's proxies run in its controller's namespace: a value names it.
	judge, _ = policyJudge(t, profileValues(t, "production"), noEdge, noIngress, httpRouteValues(map[string]any{
		"dataPlaneNamespaceSelector": map[string]any{"kubernetes.io/metadata.name": "envoy-gateway-system"}}))
	judgeFlows(t, judge, []flow{
		{peer{"Envoy's proxy", map[string]string{"app": "envoy"}, "envoy-gateway-system", "10.0.8.2"}, gateway, 8000, tcp, true},
		{proxy, gateway, 8000, tcp, false},
	})
}
