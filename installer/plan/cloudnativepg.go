package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// A CloudNativePG Cluster (postgresql.mode=cloudnativepg) creates its instance pods itself,
// from no pod template: they are planned as the operator builds them, one pod per instance
// with the Cluster's node selector, tolerations, resources and its anti-affinity between
// instances (cnpg.io/cluster, cnpg.io/podRole=instance on its topologyKey).

// cnpgCluster is the part of a Cluster's spec that places its instances.
type cnpgCluster struct {
	Spec struct {
		Instances         int `json:"instances"`
		InheritedMetadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"inheritedMetadata"`
		Resources corev1.ResourceRequirements `json:"resources"`
		Storage   struct {
			Size string `json:"size"`
		} `json:"storage"`
		Affinity struct {
			EnablePodAntiAffinity     *bool                   `json:"enablePodAntiAffinity"`
			TopologyKey               string                  `json:"topologyKey"`
			PodAntiAffinityType       string                  `json:"podAntiAffinityType"`
			NodeSelector              map[string]string       `json:"nodeSelector"`
			Tolerations               []corev1.Toleration     `json:"tolerations"`
			NodeAffinity              *corev1.NodeAffinity    `json:"nodeAffinity"`
			AdditionalPodAntiAffinity *corev1.PodAntiAffinity `json:"additionalPodAntiAffinity"`
			AdditionalPodAffinity     *corev1.PodAffinity     `json:"additionalPodAffinity"`
		} `json:"affinity"`
	} `json:"spec"`
}

func isCNPGCluster(o runtime.Object) (*unstructured.Unstructured, bool) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	gvk := u.GroupVersionKind()
	return u, gvk.Group == "postgresql.cnpg.io" && gvk.Kind == "Cluster"
}

// cnpgInstancePods are the pods a Cluster's operator would create, named as it names them.
func cnpgInstancePods(u *unstructured.Unstructured) ([]PodToPlace, error) {
	var c cnpgCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, fmt.Errorf("decoding Cluster %s: %w", u.GetName(), err)
	}
	a := c.Spec.Affinity
	selector := map[string]string{"cnpg.io/cluster": u.GetName(), "cnpg.io/podRole": "instance"}
	labels := copyMap(c.Spec.InheritedMetadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range selector {
		labels[k] = v
	}
	affinity := &corev1.Affinity{NodeAffinity: a.NodeAffinity, PodAffinity: a.AdditionalPodAffinity}
	if a.AdditionalPodAntiAffinity != nil {
		affinity.PodAntiAffinity = a.AdditionalPodAntiAffinity.DeepCopy()
	}
	var notes []string
	if a.EnablePodAntiAffinity == nil || *a.EnablePodAntiAffinity {
		topology := a.TopologyKey
		if topology == "" {
			topology = corev1.LabelHostname
		}
		term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: selector}, TopologyKey: topology}
		if affinity.PodAntiAffinity == nil {
			affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		if a.PodAntiAffinityType == "required" {
			affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
		} else {
			// CloudNativePG's default: instances spread when they can, and may share a node.
			affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				corev1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: term})
			notes = append(notes, "instances may share a node (podAntiAffinityType preferred): that node's loss takes them all")
		}
	}
	if c.Spec.Storage.Size != "" {
		notes = append(notes, "assumes its claim of "+c.Spec.Storage.Size+" binds on the chosen node (volume binding not evaluated)")
	}
	pod := podFromTemplate(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector: copyMap(a.NodeSelector), Tolerations: a.Tolerations, Affinity: affinity,
			Containers: []corev1.Container{{Name: "postgres", Resources: c.Spec.Resources}},
		},
	}, u.GetNamespace())
	component := labels["app.kubernetes.io/component"]
	instances := max(c.Spec.Instances, 1)
	out := make([]PodToPlace, 0, instances)
	for i := 0; i < instances; i++ {
		// The operator numbers its instances from 1.
		out = append(out, PodToPlace{Name: fmt.Sprintf("%s-%d", u.GetName(), i+1), Source: SourceRelease, Kind: "Cluster", Owner: u.GetName(),
			Component: component, Category: component, Index: i, Pod: pod, Notes: notes})
	}
	return out, nil
}
