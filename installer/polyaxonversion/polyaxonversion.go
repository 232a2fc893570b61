// Package polyaxonversion says which Polyaxon a chart deploys with given values: the value
// polyaxon.version, or the chart's appVersion, as the chart's templates decide (they also
// refuse a version outside the chart's annotation polyaxon-deploy/polyaxon-versions).
package polyaxonversion

import "helm.sh/helm/v3/pkg/chart"

// Of is the Polyaxon version md's chart deploys with values: polyaxon.version when set, else
// the chart's appVersion.
func Of(md *chart.Metadata, values map[string]any) string {
	if p, ok := values["polyaxon"].(map[string]any); ok {
		if v, ok := p["version"].(string); ok && v != "" {
			return v
		}
	}
	if md == nil {
		return ""
	}
	return md.AppVersion
}

// Deployed is md with AppVersion replaced by the version values deploy: what the installer's
// version guards and messages compare.
func Deployed(md *chart.Metadata, values map[string]any) *chart.Metadata {
	if md == nil {
		return nil
	}
	out := *md
	out.AppVersion = Of(md, values)
	return &out
}
