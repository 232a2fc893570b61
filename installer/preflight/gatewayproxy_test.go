package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// liveGateway is the gateway's Deployment and Service of the production profile, as the
// cluster would hold them once installed.
func liveGateway(t *testing.T) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	res := renderProduction(t, render.Options{})
	var dep *appsv1.Deployment
	var svc *corev1.Service
	for _, o := range res.Objects() {
		switch o := o.(type) {
		case *appsv1.Deployment:
			if o.Labels[render.LabelComponent] == "gateway" {
				dep = o.DeepCopy()
			}
		case *corev1.Service:
			if o.Labels[render.LabelComponent] == "gateway" {
				svc = o.DeepCopy()
			}
		}
	}
	require.NotNil(t, dep)
	require.NotNil(t, svc)
	return dep, svc
}

// check-gateway-proxy reads the live objects of the release, found by the chart's labels: not
// the rendered release, which is the chart's whatever the cluster holds.
func TestGatewayProxyReadsTheLiveGateway(t *testing.T) {
	run := func(objs ...runtime.Object) check.Result {
		c := healthy()
		c.objects = append(c.objects, objs...)
		rep := check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background())
		return byID(rep)["gateway-proxy"]
	}
	dep, svc := liveGateway(t)
	r := run(dep, svc)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "Deployment polyaxon-gateway: nginx on the Service's port, haupt on 127.0.0.1", r.Detail)

	open := dep.DeepCopy()
	open.Spec.Template.Spec.Containers[0].Args[0] = "0.0.0.0"
	r = run(open, svc)
	assert.Equal(t, check.Failed, r.Status)
	assert.Equal(t, check.Error, r.Severity)
	assert.Contains(t, r.Detail, `Deployment polyaxon-gateway: container "gateway" runs haupt (python -c) on 0.0.0.0, not 127.0.0.1`)
	assert.Contains(t, r.Docs, "preflight-checks.md#check-gateway-proxy")
	assert.Contains(t, r.Hint, "polyaxon-deploy upgrade")

	r = run(svc)
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "no Deployment of release polyaxon in polyaxon has the gateway's labels")

	// Another release's gateway in the namespace is not this one's.
	other := dep.DeepCopy()
	other.Labels["app.kubernetes.io/instance"] = "other"
	r = run(other, svc)
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "no Deployment of release polyaxon")

	r = run(dep)
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "Deployment polyaxon-gateway: no Service of the gateway selects its pods")
}
