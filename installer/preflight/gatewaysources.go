package preflight

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

const gatewaySourcesFix = "set networkPolicy.ingressNamespaceSelector to the labels of your ingress controller's namespace (e.g. kubernetes.io/metadata.name: ingress-nginx; `kubectl get ns --show-labels`)"

// checkGatewaySources warns while the gateway's NetworkPolicy lets every source in: with
// auth.enabled=false, whoever reaches its port may start runs. With the sources named, it
// warns when no namespace carries those labels (then only this namespace reaches the gateway).
func (e *Env) checkGatewaySources(ctx context.Context) (string, error) {
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	if on, _ := values.Lookup(e.Rendered.Values, "networkPolicy.enabled"); on != true {
		return "", check.Skip("networkPolicy.enabled=false: no NetworkPolicy is rendered")
	}
	port, _ := values.Lookup(e.Rendered.Values, "gateway.service.targetPort")
	raw, _ := values.Lookup(e.Rendered.Values, "networkPolicy.ingressNamespaceSelector")
	sel := labels.Set{}
	if m, ok := raw.(map[string]any); ok {
		for k, v := range m {
			sel[k] = fmt.Sprint(v)
		}
	}
	if len(sel) == 0 {
		msg := fmt.Sprintf("networkPolicy.ingressNamespaceSelector is empty: every namespace and every address outside the cluster reaches the gateway's port %v", port)
		if auth, _ := values.Lookup(e.Rendered.Values, "auth.enabled"); auth != true {
			msg += "; with auth.enabled=false, anyone who reaches it can start runs"
		}
		return "", check.Warnf("%s", msg)
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", fmt.Errorf("listing namespaces labelled %s: %w", sel, err)
	}
	if len(list.Items) == 0 {
		return "", check.Warnf("no namespace is labelled %s (networkPolicy.ingressNamespaceSelector): only pods of %s reach the gateway", sel, e.Namespace)
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return fmt.Sprintf("the gateway accepts namespaces %v and %s only", names, e.Namespace), nil
}
