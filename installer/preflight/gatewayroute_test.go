package preflight_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func toUnstructured(t *testing.T, gvk string, o any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind(gvk)
	return u
}

func gatewayWith(t *testing.T, ns, name string, listeners ...gwv1.Listener) *unstructured.Unstructured {
	return toUnstructured(t, "Gateway", &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: "traefik", Listeners: listeners}})
}

func listener(name string, protocol gwv1.ProtocolType, from gwv1.FromNamespaces, selector map[string]string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: protocol, Port: 443,
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &from}}}
	if selector != nil {
		l.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return l
}

// routeCheck renders the production profile with an HTTPRoute to gateway-system/public and runs
// the check id against a cluster that serves Gateway API (unless bare) and holds objs.
func routeCheck(t *testing.T, id string, served bool, vals map[string]any, objs ...runtime.Object) check.Result {
	t.Helper()
	e, _ := routeEnv(t, served, vals, objs...)
	return runRouteCheck(t, e, id)
}

// routeEnv is routeCheck's release and cluster; the dynamic client holds the Gateway API objects.
func routeEnv(t *testing.T, served bool, vals map[string]any, objs ...runtime.Object) (*preflight.Env, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	p, err := profile.Load("production")
	require.NoError(t, err)
	route := map[string]any{"httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public", "namespace": "gateway-system", "sectionName": "https"}}},
		// The production profile's edge is then in front of the route, with a way to log in.
		"edge": map[string]any{"htpasswd": map[string]any{"secretName": "polyaxon-users"}}}
	res, err := render.Render(ch, values.Merge(values.Merge(p.Values, route), vals), render.Options{ReleaseName: "polyaxon", Namespace: ns})
	require.NoError(t, err)
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns, "exposure": "public"}}})
	if served {
		cs.Resources = append(cs.Resources, &metav1.APIResourceList{GroupVersion: gwv1.GroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "httproutes", Kind: "HTTPRoute", Namespaced: true}, {Name: "gateways", Kind: "Gateway", Namespaced: true}}})
	}
	// Added by resource: the fake's guess from the kind would be "gatewaies".
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{})
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		gvr := schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: strings.ToLower(u.GetKind()) + "s"}
		require.NoError(t, dyn.Tracker().Create(gvr, u, u.GetNamespace()))
	}
	return &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: ch, Rendered: res, Clients: &clients{cs: cs, dyn: dyn}}, dyn
}

// runRouteCheck runs the pre- or post-install check id on e.
func runRouteCheck(t *testing.T, e *preflight.Env, id string) check.Result {
	t.Helper()
	all := append(preflight.Checks(e), preflight.PostChecks(e)...)
	for _, c := range all {
		if c.ID == id {
			return check.NewRunner([]check.Check{c}).Run(context.Background()).Results[0]
		}
	}
	t.Fatalf("no %s check", id)
	return check.Result{}
}

func TestGatewayRouteAttaches(t *testing.T) {
	https := func(from gwv1.FromNamespaces, sel map[string]string) gwv1.Listener {
		return listener("https", gwv1.HTTPSProtocolType, from, sel)
	}
	kinds := func(l gwv1.Listener, kinds ...string) gwv1.Listener {
		for _, k := range kinds {
			l.AllowedRoutes.Kinds = append(l.AllowedRoutes.Kinds, gwv1.RouteGroupKind{Kind: gwv1.Kind(k)})
		}
		return l
	}
	cases := []struct {
		name   string
		served bool
		objs   []runtime.Object
		status check.Status
		detail string
	}{
		{"Gateway API not served", false, nil, check.Failed, "does not serve gateway.networking.k8s.io/v1 (the Gateway API CRDs are not installed)"},
		{"no such Gateway", true, nil, check.Failed, "httpRoute.parentRefs: Gateway gateway-system/public not found"},
		{"a listener for every namespace", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", https(gwv1.NamespacesFromAll, nil))},
			check.Passed, "the HTTPRoute can attach to Gateway gateway-system/public listener https"},
		{"a listener for its own namespace only", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", https(gwv1.NamespacesFromSame, nil))},
			check.Failed, "listener https takes routes from its own namespace gateway-system only (allowedRoutes.namespaces.from: Same): let its listener's allowedRoutes admit namespace polyaxon"},
		{"a listener for labelled namespaces", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", https(gwv1.NamespacesFromSelector, map[string]string{"exposure": "public"}))},
			check.Passed, "listener https"},
		{"a listener for other labels", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", https(gwv1.NamespacesFromSelector, map[string]string{"exposure": "internal"}))},
			check.Failed, "takes routes from namespaces matching exposure=internal, and polyaxon does not"},
		{"no listener of that name", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", listener("web", gwv1.HTTPProtocolType, gwv1.NamespacesFromAll, nil))},
			check.Failed, "has no listener https (its listeners: web): set httpRoute.parentRefs[].sectionName to one of them"},
		{"a TCP listener", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", listener("https", gwv1.TCPProtocolType, gwv1.NamespacesFromAll, nil))},
			check.Failed, "speaks TCP, not HTTP or HTTPS"},
		{"a listener for other kinds of route", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", kinds(https(gwv1.NamespacesFromAll, nil), "GRPCRoute"))},
			check.Failed, "listener https takes no HTTPRoute (allowedRoutes.kinds)"},
		{"a listener for HTTPRoutes among other kinds", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", kinds(https(gwv1.NamespacesFromAll, nil), "GRPCRoute", "HTTPRoute"))},
			check.Passed, "the HTTPRoute can attach to Gateway gateway-system/public listener https"},
		{"a listener without allowedRoutes: its own namespace only", true, []runtime.Object{gatewayWith(t, "gateway-system", "public", gwv1.Listener{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443})},
			check.Failed, "listener https takes routes from its own namespace gateway-system only (allowedRoutes.namespaces.from: Same)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := routeCheck(t, "gateway-route", tc.served, nil, tc.objs...)
			assert.Equal(t, tc.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, tc.detail)
		})
	}
}

func TestGatewayRouteStatusAfterInstall(t *testing.T) {
	gw := gwv1.Namespace("gateway-system")
	route := func(conds ...metav1.Condition) *unstructured.Unstructured {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: ns},
			Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "public", Namespace: &gw}}}}}
		if conds != nil {
			r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "public", Namespace: &gw},
				ControllerName: "traefik.io/gateway-controller", Conditions: conds}}
		}
		return toUnstructured(t, "HTTPRoute", r)
	}
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	}
	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", "")
	r := routeCheck(t, "gateway-route-status", true, nil, route(accepted, cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "HTTPRoute polyaxon-gateway accepted, its backend resolved, by Gateway gateway-system/public (traefik.io/gateway-controller)")

	r = routeCheck(t, "gateway-route-status", true, nil, route(accepted, cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", "service polyaxon/polyaxon-gateway not found")))
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "HTTPRoute polyaxon-gateway is not ResolvedRefs by Gateway gateway-system/public (traefik.io/gateway-controller): BackendNotFound: service polyaxon/polyaxon-gateway not found")

	// Right after the install the controller has not written the route's status yet: the check
	// reads it again 2 seconds later (not in a busy loop), by when the controller accepted it.
	e, dyn := routeEnv(t, true, nil, route(accepted, cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")))
	var reads atomic.Int32
	var first time.Time
	dyn.PrependReactor("get", "httproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if reads.Add(1) == 1 {
			first = time.Now()
		}
		if time.Since(first) < time.Second {
			return true, route(), nil
		}
		return false, nil, nil
	})
	r = runRouteCheck(t, e, "gateway-route-status")
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "HTTPRoute polyaxon-gateway accepted, its backend resolved")
	assert.Equal(t, int32(2), reads.Load(), "the route read once, then once more 2 seconds later")
}

// With httpRoute off neither route check has anything to check.
func TestGatewayRouteChecksSkipWithoutARoute(t *testing.T) {
	off := map[string]any{"httpRoute": map[string]any{"enabled": false}}
	for _, id := range []string{"gateway-route", "gateway-route-status"} {
		r := routeCheck(t, id, true, off)
		assert.Equal(t, check.Skipped, r.Status, "%s: %s", id, r.Detail)
		assert.Equal(t, "httpRoute is off", r.Detail, id)
	}
}

// A chart rendering its HTTPRoute in gateway.networking.k8s.io/v1beta1 (the render leaves it
// unstructured: the installer types Gateway API v1 only) is checked all the same.
func TestGatewayRouteOfAnOlderAPIVersion(t *testing.T) {
	e, _ := routeEnv(t, true, nil)
	n := 0
	for i, m := range e.Rendered.Manifests {
		if m.Kind() != "HTTPRoute" {
			continue
		}
		u := m.Object.DeepCopy()
		u.SetAPIVersion("gateway.networking.k8s.io/v1beta1")
		data, err := u.MarshalJSON()
		require.NoError(t, err)
		obj, typed, err := render.Decode(data)
		require.NoError(t, err)
		require.Nil(t, typed)
		e.Rendered.Manifests[i] = render.Manifest{Template: m.Template, Content: string(data), Object: obj}
		n++
	}
	require.Equal(t, 1, n)
	r := runRouteCheck(t, e, "gateway-route")
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "httpRoute.parentRefs: Gateway gateway-system/public not found")
}
