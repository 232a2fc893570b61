package render

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelComponent is the standard label that tells one component's objects from another's.
const LabelComponent = "app.kubernetes.io/component"

// Names are a release's names and labels as the chart's own helpers make them
// (templates/_helpers.tpl): nameOverride and fullnameOverride change them, so the installer
// selects and names the release's objects with these and never with a literal.
type Names struct {
	Release string `json:"-"`
	// Name is the app.kubernetes.io/name label of every object.
	Name string `json:"name"`
	// Fullname prefixes every object name.
	Fullname string `json:"fullname"`
	// Selector holds the labels every object of the release carries (selectorLabels without
	// the component).
	Selector map[string]string `json:"selector"`
	// Components is the object name of each declared component (files/components.yaml).
	Components map[string]string `json:"components"`
	// PlatformSecret is the Secret the platform reads its keys from (secrets.existingSecret
	// when the user names one).
	PlatformSecret string `json:"platformSecret"`
}

// namesTemplate prints Names as JSON through the chart's helpers.
const namesTemplate = `
{{- $decl := .Files.Get "files/components.yaml" | fromYaml -}}
{{- $components := dict -}}
{{- range $c := concat ($decl.core | default list) ($decl.dependencies | default list) -}}
{{- $_ := set $components $c (include "polyaxon.componentName" (dict "ctx" $ "component" $c)) -}}
{{- end -}}
{{- dict
  "name" (include "polyaxon.name" .)
  "fullname" (include "polyaxon.fullname" .)
  "selector" (include "polyaxon.selectorLabels" (dict "ctx" . "component" "any") | fromYaml)
  "components" $components
  "platformSecret" (include "polyaxon.platformSecretName" .)
  | toJson -}}
`

// NamesOf evaluates the chart's name helpers for release with vals (the user's values; the
// chart's defaults are added here). Only the helpers run: no object is rendered.
func NamesOf(ch *chart.Chart, vals map[string]any, release string) (Names, error) {
	if ch == nil || ch.Metadata == nil {
		return Names{}, fmt.Errorf("release %s: no chart to read its names from", release)
	}
	probe := *ch
	probe.Templates = nil
	for _, t := range ch.Templates {
		if strings.HasPrefix(path.Base(t.Name), "_") {
			probe.Templates = append(probe.Templates, t)
		}
	}
	const name = "templates/polyaxon-deploy-names.json"
	probe.Templates = append(probe.Templates, &chart.File{Name: name, Data: []byte(namesTemplate)})
	opts := Options{ReleaseName: release, SkipSchemaValidation: true}.withDefaults()
	release = opts.ReleaseName
	top, err := toRenderValues(&probe, vals, opts)
	if err != nil {
		return Names{}, err
	}
	files, err := engine.Render(&probe, top)
	if err != nil {
		return Names{}, fmt.Errorf("release %s: evaluating the chart's name helpers: %w", release, err)
	}
	var n Names
	if err := json.Unmarshal([]byte(files[probe.Name()+"/"+name]), &n); err != nil {
		return Names{}, fmt.Errorf("release %s: the chart's name helpers: %w", release, err)
	}
	delete(n.Selector, LabelComponent)
	if n.Name == "" || n.Fullname == "" || len(n.Selector) == 0 {
		return Names{}, fmt.Errorf("release %s: chart %s has no polyaxon.name, polyaxon.fullname or polyaxon.selectorLabels helper", release, ch.Name())
	}
	n.Release = release
	return n, nil
}

// NamesOfRelease reads the names of a stored Helm release: its own chart and values.
func NamesOfRelease(rel *helmrelease.Release) (Names, error) {
	if rel == nil {
		return Names{}, fmt.Errorf("no release to read names from")
	}
	return NamesOf(rel.Chart, rel.Config, rel.Name)
}

// SelectorString selects every object of the release the chart labels.
func (n Names) SelectorString() string {
	return labels.SelectorFromSet(n.Selector).String()
}

// ComponentSelector selects the release's objects of the components given.
func (n Names) ComponentSelector(components ...string) string {
	sel := labels.SelectorFromSet(n.Selector).String()
	if len(components) == 0 {
		return sel
	}
	return sel + "," + LabelComponent + " in (" + strings.Join(slices.Sorted(slices.Values(components)), ",") + ")"
}

// Owns reports whether objLabels carry the release's labels.
func (n Names) Owns(objLabels map[string]string) bool {
	return len(n.Selector) > 0 && labels.SelectorFromSet(n.Selector).Matches(labels.Set(objLabels))
}

// Component is the object name of a declared component ("" for an unknown one).
func (n Names) Component(c string) string { return n.Components[c] }
