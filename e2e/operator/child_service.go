package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A service whose pods declare no port is reached on 6006 (mloperator managers/services.go).
const defaultServicePort = 6006

// convertService: a polyaxon.com Service becomes a Deployment of serviceSpec.template and a
// ClusterIP Service on its ports, both selecting the run's labels.
func convertService(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error) {
	tmpl, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, invalid("%s %s: serviceSpec has no template", cr.GetKind(), cr.GetName())
	}
	replicas := int64(1)
	if n, ok := asInt64(spec["replicas"]); ok {
		replicas = n
	}
	selector := labelsAsMap(cr)
	deploy := newChild(cr, deployment, cr.GetName(), map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": selector},
		"template": tmpl,
	})

	ports, err := servicePorts(spec, tmpl)
	if err != nil {
		return nil, invalid("%s %s: %v", cr.GetKind(), cr.GetName(), err)
	}
	var svcPorts []any
	for _, p := range ports {
		svcPorts = append(svcPorts, map[string]any{
			"name":       fmt.Sprintf("port-%d", p),
			"port":       p,
			"targetPort": p,
			"protocol":   "TCP",
		})
	}
	name := cr.GetName()
	if external, _ := spec["isExternal"].(bool); external {
		name += "-ext" // mloperator reconcileBaseService
	}
	svc := newChild(cr, coreService, name, map[string]any{
		"type":     "ClusterIP",
		"selector": labelsAsMap(cr),
		"ports":    svcPorts,
	})
	return &Desired{Backend: deployment, Primary: deploy, Extras: []*unstructured.Unstructured{svc}}, nil
}

// servicePorts: serviceSpec.ports, else the first container's ports, else 6006.
func servicePorts(spec, tmpl map[string]any) ([]int64, error) {
	var ports []int64
	if list, ok := spec["ports"].([]any); ok {
		for _, v := range list {
			p, ok := asInt64(v)
			if !ok {
				return nil, fmt.Errorf("serviceSpec.ports: %v is not a port", v)
			}
			ports = append(ports, p)
		}
		return ports, nil
	}
	containers, _, _ := unstructured.NestedSlice(tmpl, "spec", "containers")
	if len(containers) > 0 {
		first, _ := containers[0].(map[string]any)
		cports, _, _ := unstructured.NestedSlice(first, "ports")
		for _, v := range cports {
			cp, _ := v.(map[string]any)
			if p, ok := asInt64(cp["containerPort"]); ok {
				ports = append(ports, p)
			}
		}
	}
	if len(ports) == 0 {
		ports = []int64{defaultServicePort}
	}
	return ports, nil
}

// labelsAsMap is cr's labels as an unstructured value.
func labelsAsMap(cr *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range cr.GetLabels() {
		out[k] = v
	}
	return out
}
