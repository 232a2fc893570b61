package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// servesMonitoring is a cluster with the Prometheus Operator's CRDs for the kinds given.
func servesMonitoring(kinds ...string) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range kinds {
		m.Add(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	return m
}

// TestMonitoringCRDs: a ServiceMonitor or PrometheusRule on a cluster without its CRD is refused
// before anything changes, naming the value and the kind; the exporters alone need none.
func TestMonitoringCRDs(t *testing.T) {
	res := runCheck(t, "monitoring-crds", renderProduction(t, render.Options{}, "metrics.enabled=true"), healthy(), nil)
	assert.Equal(t, check.Skipped, res.Status, res.Detail)

	both := renderProduction(t, render.Options{}, "metrics.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")
	res = runCheck(t, "monitoring-crds", both, healthy(), nil)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "metrics.serviceMonitor.enabled is true but the cluster does not serve ServiceMonitor (monitoring.coreos.com/v1)")
	assert.Contains(t, res.Detail, "metrics.prometheusRule.enabled is true but the cluster does not serve PrometheusRule (monitoring.coreos.com/v1)")
	assert.Contains(t, res.Detail, "or set metrics.prometheusRule.enabled=false")

	res = runCheck(t, "monitoring-crds", both, healthy(), servesMonitoring("ServiceMonitor"))
	assert.Equal(t, check.Failed, res.Status)
	assert.NotContains(t, res.Detail, "ServiceMonitor")
	assert.Contains(t, res.Detail, "PrometheusRule")

	res = runCheck(t, "monitoring-crds", both, healthy(), servesMonitoring("ServiceMonitor", "PrometheusRule"))
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "the cluster serves PrometheusRule and ServiceMonitor (monitoring.coreos.com)", res.Detail)
}
