package preflight

import (
	"cmp"
	"context"
	"fmt"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

const gatewaySourcesFix = "set networkPolicy.ingressNamespaceSelector to the labels of your ingress controller's namespace (e.g. kubernetes.io/metadata.name: ingress-nginx; `kubectl get ns --show-labels`)"

// checkGatewaySources warns while the gateway's NetworkPolicy lets every source in: with
// auth.enabled=false, whoever reaches its port may start runs. With the sources named (the
// ingress controller's namespace, the HTTPRoute's Gateways' data planes), it warns when one
// matches no namespace (then that way in is closed).
func (e *Env) checkGatewaySources(ctx context.Context) (string, error) {
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if !v.NetworkPolicy.Enabled {
		return "", check.Skip("networkPolicy.enabled=false: no NetworkPolicy is rendered")
	}
	port := v.Gateway.Service.TargetPort
	type source struct {
		sel labels.Set
		at  string
	}
	var sources []source
	if sel := labels.Set(v.NetworkPolicy.IngressNamespaceSelector); len(sel) > 0 {
		sources = append(sources, source{sel, "networkPolicy.ingressNamespaceSelector"})
	}
	for _, sel := range e.dataPlaneSelectors(v) {
		sources = append(sources, source{sel, "the HTTPRoute's Gateways: httpRoute.dataPlaneNamespaceSelector"})
	}
	if len(sources) == 0 {
		msg := fmt.Sprintf("networkPolicy.ingressNamespaceSelector is empty: every namespace and every address outside the cluster reaches the gateway's users' port %v, and only the runs' own NetworkPolicy keeps runs off it", port)
		if !v.Auth.Enabled {
			msg += "; with auth.enabled=false, anyone who reaches it can start runs"
		}
		return "", check.Warnf("%s", msg)
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	var names []string
	for _, s := range sources {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: s.sel.String()})
		if err != nil {
			return "", fmt.Errorf("listing namespaces labelled %s: %w", s.sel, err)
		}
		if len(list.Items) == 0 {
			return "", check.Warnf("no namespace is labelled %s (%s): only pods of %s reach the gateway", s.sel, s.at, e.Namespace)
		}
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
	}
	return fmt.Sprintf("the gateway accepts namespaces %v and %s only", names, e.Namespace), nil
}

// dataPlaneSelectors: where the HTTPRoute's Gateways carry traffic from, as the chart's
// NetworkPolicy admits it (httpRoute.dataPlaneNamespaceSelector, else each parent's namespace).
func (e *Env) dataPlaneSelectors(v *chartvalues.Values) []labels.Set {
	route := v.HTTPRoute
	if !route.Enabled {
		return nil
	}
	if sel := labels.Set(route.DataPlaneNamespaceSelector); len(sel) > 0 {
		return []labels.Set{sel}
	}
	var out []labels.Set
	seen := map[string]bool{}
	for _, ref := range route.ParentRefs {
		ns := cmp.Or(ref.Namespace, e.Namespace)
		if !seen[ns] {
			seen[ns] = true
			out = append(out, labels.Set{"kubernetes.io/metadata.name": ns})
		}
	}
	return out
}
