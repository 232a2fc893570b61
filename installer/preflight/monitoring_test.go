package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// withMonitoringKinds is a cluster's mapper that serves, of the Prometheus Operator's kinds,
// only those named: as a cluster without its CRDs, or with some of them.
type withMonitoringKinds struct {
	meta.RESTMapper
	served map[string]bool
}

func (m withMonitoringKinds) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gk.Group == "monitoring.coreos.com" && !m.served[gk.Kind] {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// monitoringCheck runs monitoring-crds against a healthy cluster serving the kinds given.
func monitoringCheck(t *testing.T, rendered *render.Result, kinds ...string) check.Result {
	t.Helper()
	cl := healthy().clients(t)
	served := map[string]bool{}
	for _, k := range kinds {
		served[k] = true
	}
	cl.mapper = withMonitoringKinds{RESTMapper: cl.mapper, served: served}
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: testChart(t), Rendered: rendered, Policy: restricted, Clients: cl}
	for _, ch := range preflight.Checks(e) {
		if ch.ID == "monitoring-crds" {
			return check.NewRunner([]check.Check{ch}).Run(context.Background()).Results[0]
		}
	}
	t.Fatal("no check monitoring-crds")
	return check.Result{}
}

// TestMonitoringCRDs: a ServiceMonitor or PrometheusRule on a cluster without its CRD is refused
// before anything changes, naming the value and the kind; the exporters alone need none.
func TestMonitoringCRDs(t *testing.T) {
	res := monitoringCheck(t, renderProduction(t, render.Options{}, "metrics.enabled=true"))
	assert.Equal(t, check.Skipped, res.Status, res.Detail)

	both := renderProduction(t, render.Options{}, "metrics.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")
	res = monitoringCheck(t, both)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "metrics.serviceMonitor.enabled is true but the cluster does not serve ServiceMonitor (monitoring.coreos.com/v1)")
	assert.Contains(t, res.Detail, "metrics.prometheusRule.enabled is true but the cluster does not serve PrometheusRule (monitoring.coreos.com/v1)")
	assert.Contains(t, res.Detail, "or set metrics.prometheusRule.enabled=false")

	res = monitoringCheck(t, both, "ServiceMonitor")
	assert.Equal(t, check.Failed, res.Status)
	assert.NotContains(t, res.Detail, "ServiceMonitor")
	assert.Contains(t, res.Detail, "PrometheusRule")

	res = monitoringCheck(t, both, "ServiceMonitor", "PrometheusRule")
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "the cluster serves PrometheusRule and ServiceMonitor (monitoring.coreos.com)", res.Detail)
}
