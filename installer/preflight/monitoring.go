package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

const monitoringGroup = "monitoring.coreos.com"

// monitoringValues names the value that renders each Prometheus Operator kind.
var monitoringValues = map[string]string{
	"ServiceMonitor": "metrics.serviceMonitor.enabled",
	"PrometheusRule": "metrics.prometheusRule.enabled",
}

const monitoringFix = "install the Prometheus Operator's CRDs (kube-prometheus-stack or the prometheus-operator chart brings them), or set the value named to false"

// checkMonitoringCRDs: the Prometheus Operator kinds the release renders are served, so that
// an install is not refused half-way by an object the API server does not know.
func (e *Env) checkMonitoringCRDs(ctx context.Context) (string, error) {
	asked := map[string]string{} // kind -> apiVersion
	for _, o := range e.objects() {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Group == monitoringGroup {
			asked[gvk.Kind] = gvk.GroupVersion().String()
		}
	}
	if len(asked) == 0 {
		return "", check.Skip("the release renders no Prometheus Operator object (metrics.serviceMonitor and metrics.prometheusRule are off)")
	}
	if e.Clients == nil {
		return "", errors.New("no cluster configured")
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return "", err
	}
	kinds := make([]string, 0, len(asked))
	for k := range asked {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var missing []string
	for _, kind := range kinds {
		gv := asked[kind]
		version := strings.TrimPrefix(gv, monitoringGroup+"/")
		_, err := mapper.RESTMapping(schema.GroupKind{Group: monitoringGroup, Kind: kind}, version)
		switch {
		case meta.IsNoMatchError(err):
			value := monitoringValues[kind]
			if value == "" {
				value = "metrics"
			}
			missing = append(missing, fmt.Sprintf("%s is true but the cluster does not serve %s (%s): install the Prometheus Operator's CRDs, or set %s=false", value, kind, gv, value))
		case err != nil:
			return "", fmt.Errorf("asking the API server for %s (%s): %w", kind, gv, err)
		}
	}
	if len(missing) > 0 {
		return "", errors.New(strings.Join(missing, "; "))
	}
	return "the cluster serves " + strings.Join(kinds, " and ") + " (" + monitoringGroup + ")", nil
}
