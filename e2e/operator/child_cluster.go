package operator

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// convertRay: rayClusterSpec becomes a ray.io/v1 RayCluster. Polyaxon's head and worker
// groups (polyaxon _k8s/custom_resources/ray_cluster.py) map onto KubeRay's headGroupSpec and
// workerGroupSpecs; their templates pass unchanged. entrypoint, metadata and runtimeEnv have no
// RayCluster field: how the real operator submits them is not published.
func convertRay(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error) {
	head, ok := spec["head"].(map[string]any)
	if !ok {
		return nil, invalid("%s %s: rayClusterSpec has no head", cr.GetKind(), cr.GetName())
	}
	headGroup := map[string]any{"template": head["template"], "rayStartParams": startParams(head)}
	cluster := map[string]any{"headGroupSpec": headGroup}
	copyFields(cluster, spec, "rayVersion", "enableInTreeAutoscaling", "autoscalerOptions", "suspend")

	if workers, ok := spec["workers"].([]any); ok && len(workers) > 0 {
		var groups []any
		for _, w := range workers {
			w, _ := w.(map[string]any)
			if w == nil {
				continue
			}
			g := map[string]any{"rayStartParams": startParams(w)}
			copyFields(g, w, "groupName", "replicas", "minReplicas", "maxReplicas", "template")
			groups = append(groups, g)
		}
		cluster["workerGroupSpecs"] = groups
	}
	return &Desired{Backend: rayCluster, Primary: newChild(cr, rayCluster, cr.GetName(), cluster)}, nil
}

func startParams(group map[string]any) map[string]any {
	p, _ := group["rayStartParams"].(map[string]any)
	return stringMap(p)
}

// convertDask: daskClusterSpec becomes a kubernetes.dask.org/v1 DaskCluster: its Worker and
// Scheduler replicas (polyaxon _k8s/custom_resources/dask_cluster.py) give the pod specs, the
// scheduler's Service is Polyaxon's. A DaskCluster takes pod specs, not templates, so the
// templates' labels and annotations go in each group's metadata.
func convertDask(cr *unstructured.Unstructured, spec map[string]any) (*Desired, error) {
	replicas, _ := spec["replicaSpecs"].(map[string]any)
	worker, _ := replicas["Worker"].(map[string]any)
	scheduler, _ := replicas["Scheduler"].(map[string]any)
	if worker == nil || scheduler == nil {
		return nil, invalid("%s %s: daskClusterSpec needs Worker and Scheduler replicaSpecs", cr.GetKind(), cr.GetName())
	}
	w := daskGroup(worker)
	copyFields(w, worker, "replicas")
	s := daskGroup(scheduler)
	copyFields(s, spec, "service")
	cluster := map[string]any{"worker": w, "scheduler": s}
	copyFields(cluster, spec, "idleTimeout")
	return &Desired{Backend: daskCluster, Primary: newChild(cr, daskCluster, cr.GetName(), cluster)}, nil
}

func daskGroup(replica map[string]any) map[string]any {
	tmpl, _ := replica["template"].(map[string]any)
	g := map[string]any{}
	copyFields(g, tmpl, "spec")
	if meta, ok := tmpl["metadata"].(map[string]any); ok {
		m := map[string]any{}
		copyFields(m, meta, "labels", "annotations")
		g["metadata"] = m
	}
	return g
}
