package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// edgeCheck renders the production profile with vals and runs check id against a cluster
// holding objs.
func edgeCheck(t *testing.T, id string, vals map[string]any, objs ...runtime.Object) check.Result {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	p, err := profile.Load("production")
	require.NoError(t, err)
	res, err := render.Render(ch, values.Merge(p.Values, vals), render.Options{ReleaseName: "polyaxon", Namespace: ns})
	require.NoError(t, err)
	return edgeCheckOf(t, id, ch, res, objs...)
}

// edgeCheckOf runs check id on chart ch rendered as res, against a cluster holding objs.
func edgeCheckOf(t *testing.T, id string, ch *chart.Chart, res *render.Result, objs ...runtime.Object) check.Result {
	t.Helper()
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: ch, Rendered: res, Clients: &clients{cs: fake.NewClientset(objs...)}}
	for _, c := range preflight.Checks(e) {
		if c.ID == id {
			return check.NewRunner([]check.Check{c}).Run(context.Background()).Results[0]
		}
	}
	t.Fatalf("no %s check", id)
	return check.Result{}
}

func edgeSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

var (
	exposed     = map[string]any{"ingress": map[string]any{"enabled": true, "host": "polyaxon.example.com"}}
	htpasswdOn  = map[string]any{"edge": map[string]any{"htpasswd": map[string]any{"secretName": "polyaxon-users"}}}
	oidcOn      = map[string]any{"edge": map[string]any{"oidc": map[string]any{"issuerURL": "https://login.example.com", "clientID": "polyaxon", "clientSecret": map[string]any{"name": "polyaxon-oidc"}, "emailDomains": []any{"example.com"}}}}
	bcryptAlice = "alice:$2y$05$6Vx6m0VZb2e7dF0p0Xg8UeJkO7l3Hk1Y6t0m5q2v8o3yq0nB5n3eK\n"
)

func TestEdgeSecrets(t *testing.T) {
	withHtpasswd := values.Merge(exposed, htpasswdOn)
	for _, c := range []struct {
		name   string
		vals   map[string]any
		objs   []runtime.Object
		status check.Status
		detail string
	}{
		{"no edge", nil, nil, check.Skipped, "no edge is deployed"},
		{"the htpasswd Secret is missing", withHtpasswd, nil, check.Failed, `edge.htpasswd.secretName: Secret "polyaxon-users" not found in namespace "polyaxon"`},
		{"the htpasswd Secret has another key", withHtpasswd, []runtime.Object{edgeSecret("polyaxon-users", map[string]string{"users": bcryptAlice})}, check.Failed,
			`Secret "polyaxon-users" has no key "htpasswd" (it has users)`},
		{"an MD5 entry oauth2-proxy cannot read", withHtpasswd, []runtime.Object{edgeSecret("polyaxon-users", map[string]string{"htpasswd": bcryptAlice + "bob:$apr1$x1y2z3$abcdefghijklmnopqrstu0\n"})}, check.Failed,
			"user(s) bob are hashed with a scheme oauth2-proxy does not read"},
		{"an empty file", withHtpasswd, []runtime.Object{edgeSecret("polyaxon-users", map[string]string{"htpasswd": "\n"})}, check.Failed, "holds no user"},
		{"a good htpasswd Secret", withHtpasswd, []runtime.Object{edgeSecret("polyaxon-users", map[string]string{"htpasswd": bcryptAlice + "carol:{SHA}fEqNCco3Yq9h5ZUglD3CZJT4lBs=\n"})}, check.Passed,
			"the edge reads Secret polyaxon-users (htpasswd, 2 user(s))"},
		{"the OIDC client Secret without its key", values.Merge(exposed, oidcOn), []runtime.Object{edgeSecret("polyaxon-oidc", map[string]string{"secret": "x"})}, check.Failed,
			`edge.oidc.clientSecret.name: Secret "polyaxon-oidc" has no key "client-secret"`},
		{"the OIDC client Secret", values.Merge(exposed, oidcOn), []runtime.Object{edgeSecret("polyaxon-oidc", map[string]string{"client-secret": "x"})}, check.Passed,
			"the edge reads Secret polyaxon-oidc (key client-secret)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := edgeCheck(t, "edge-secrets", c.vals, c.objs...)
			assert.Equal(t, c.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, c.detail)
		})
	}
}

func TestEdgeExposure(t *testing.T) {
	off := map[string]any{"edge": map[string]any{"enabled": false}}
	route := map[string]any{"ingress": map[string]any{"enabled": false}, "httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public", "namespace": "gateway-system"}}}}
	for _, c := range []struct {
		name   string
		vals   map[string]any
		status check.Status
		detail string
	}{
		{"nothing exposed", nil, check.Skipped, "nothing exposes the release"},
		{"an Ingress through the edge", values.Merge(exposed, htpasswdOn), check.Passed, "every way in goes through the edge (Ingress polyaxon)"},
		{"an HTTPRoute through the edge", values.Merge(route, htpasswdOn), check.Passed, "(HTTPRoute polyaxon-gateway)"},
		{"an Ingress without the edge", values.Merge(exposed, off), check.Warned, "reachable from outside with no authenticating edge: Ingress polyaxon (to Service polyaxon-gateway)"},
		{"an HTTPRoute without the edge", values.Merge(route, off), check.Warned, "HTTPRoute polyaxon-gateway (to Service polyaxon-gateway)"},
		{"a LoadBalancer gateway beside the edge", values.Merge(values.Merge(exposed, htpasswdOn), map[string]any{"gateway": map[string]any{"service": map[string]any{"type": "LoadBalancer"}}}), check.Warned,
			"the gateway Service polyaxon-gateway of type LoadBalancer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := edgeCheck(t, "edge-exposure", c.vals)
			assert.Equal(t, c.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, c.detail)
		})
	}
}

// A release whose manifests are left unstructured (render.Result.Objects gives the object
// itself when it has no typed form) is read as the typed one: the edge and its Secrets are
// found, and so is what exposes the release.
func TestEdgeChecksReadUnstructuredManifests(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	p, err := profile.Load("production")
	require.NoError(t, err)
	res, err := render.Render(ch, values.Merge(p.Values, values.Merge(exposed, htpasswdOn)), render.Options{ReleaseName: "polyaxon", Namespace: ns})
	require.NoError(t, err)
	for i := range res.Manifests {
		res.Manifests[i].Typed = nil
	}
	r := edgeCheckOf(t, "edge-secrets", ch, res)
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, `edge.htpasswd.secretName: Secret "polyaxon-users" not found in namespace "polyaxon"`)
	r = edgeCheckOf(t, "edge-exposure", ch, res)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "every way in goes through the edge (Ingress polyaxon)")
}

// An Ingress's default backend is a way in too: to the gateway, it goes around the edge.
func TestEdgeExposureOfAnIngressDefaultBackend(t *testing.T) {
	e := env(t, healthy(), true, restricted)
	ing := ingressOf(t, e)
	ing.Spec.Rules = nil
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "polyaxon-gateway", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	r := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["edge-exposure"]
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "reachable from outside with no authenticating edge: Ingress polyaxon-gateway (to Service polyaxon-gateway)")
}
