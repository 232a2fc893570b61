// Package runs knows Polyaxon's run pods: the run categories the chart declares once
// (charts/polyaxon/files/run-categories.yaml) and how a run pod of each looks as Polyaxon
// creates it, so `plan` and `check` can ask the chart's admission policies where it would go.
package runs

import (
	"fmt"
	"sort"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// DeclarationFile is the chart file that declares the run categories.
const DeclarationFile = "files/run-categories.yaml"

// Labels Polyaxon 2.15 puts on every run pod (cli `_k8s/converter/base/base.py`).
const (
	PartOfLabel    = "app.kubernetes.io/part-of"
	PartOf         = "polyaxon-runs"
	ComponentLabel = "app.kubernetes.io/component"
)

// Declaration is the chart's run categories.
type Declaration struct {
	// Label is the pod label a run sets (environment.labels) to choose its category.
	Label string `json:"label"`
	// Fallback is the category of run pods no other category claims.
	Fallback   string     `json:"fallback"`
	Categories []Category `json:"categories"`
}

// Category claims the run pods whose component label is one of Components.
type Category struct {
	Name       string   `json:"name"`
	Components []string `json:"components"`
}

// Load reads the declaration from the chart.
func Load(ch *chart.Chart) (*Declaration, error) {
	for _, f := range ch.Files {
		if f.Name == DeclarationFile {
			return Parse(f.Data)
		}
	}
	return nil, fmt.Errorf("chart %s has no %s", ch.Name(), DeclarationFile)
}

// Parse reads a declaration and checks that it is whole.
func Parse(data []byte) (*Declaration, error) {
	var d Declaration
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DeclarationFile, err)
	}
	if d.Label == "" || len(d.Categories) == 0 {
		return nil, fmt.Errorf("%s: label and categories are required", DeclarationFile)
	}
	seen := map[string]bool{}
	for _, c := range d.Categories {
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: category %q is declared twice", DeclarationFile, c.Name)
		}
		seen[c.Name] = true
	}
	if !seen[d.Fallback] {
		return nil, fmt.Errorf("%s: fallback %q is not a category", DeclarationFile, d.Fallback)
	}
	return &d, nil
}

// Names lists the categories in declaration order.
func (d *Declaration) Names() []string {
	out := make([]string, len(d.Categories))
	for i, c := range d.Categories {
		out[i] = c.Name
	}
	return out
}

// Has reports whether name is a category.
func (d *Declaration) Has(name string) bool {
	for _, c := range d.Categories {
		if c.Name == name {
			return true
		}
	}
	return false
}

// ProbeRequests are the requests of a probe pod: tiny, so that a probe tests where a run may
// go (selectors, taints, pod slots), not how big it is.
var ProbeRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("16Mi"),
}

// Pod is a run pod of the category as Polyaxon creates it: its run labels, its component (the
// category's first, or Polyaxon's job component), and the category label a run sets itself, so
// that whatever the chart's policies match on, this pod is the category's.
func (d *Declaration) Pod(category, namespace string) *corev1.Pod {
	component := "polyaxon-jobs"
	for _, c := range d.Categories {
		if c.Name == category && len(c.Components) > 0 {
			component = c.Components[0]
		}
	}
	labels := map[string]string{
		PartOfLabel:                    PartOf,
		ComponentLabel:                 component,
		"app.kubernetes.io/managed-by": "polyaxon",
		"app.kubernetes.io/name":       "polyaxon-deploy-probe-" + category,
		d.Label:                        category,
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "polyaxon-probe-" + category + "-", Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:      "polyaxon-main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: ProbeRequests.DeepCopy(), Limits: corev1.ResourceList{corev1.ResourceMemory: ProbeRequests[corev1.ResourceMemory]}},
			}},
		},
	}
}

// Components lists every component label some category claims, sorted.
func (d *Declaration) Components() []string {
	var out []string
	for _, c := range d.Categories {
		out = append(out, c.Components...)
	}
	sort.Strings(out)
	return out
}
