// Package polyaxonversion says which Polyaxon a chart deploys with given values: the value
// polyaxon.version, or the chart's appVersion, as the chart's templates decide (they also
// refuse a version outside the chart's annotation polyaxon-deploy/polyaxon-versions).
package polyaxonversion

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
)

// RangeAnnotation is the Chart.yaml annotation holding the Polyaxon versions a chart renders
// correctly, as a semver constraint (">=2.15.0, <2.19.0"); the chart's templates refuse others.
const RangeAnnotation = "polyaxon-deploy/polyaxon-versions"

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

// Supports says whether md's chart deploys Polyaxon version v: v is inside the range of its
// RangeAnnotation, checked as the templates' semverCompare checks it. A chart without the
// annotation supports its appVersion only. The error is a range or version that does not parse.
func Supports(md *chart.Metadata, v string) (bool, error) {
	if md == nil {
		return false, fmt.Errorf("polyaxon version %q: the chart has no metadata", v)
	}
	want, err := semver.NewVersion(v)
	if err != nil {
		return false, fmt.Errorf("polyaxon version %q: %w", v, err)
	}
	r, ok := md.Annotations[RangeAnnotation]
	if !ok || r == "" {
		app, err := semver.NewVersion(md.AppVersion)
		return err == nil && app.Equal(want), nil
	}
	c, err := semver.NewConstraint(r)
	if err != nil {
		return false, fmt.Errorf("chart %s: annotation %s %q: %w", md.Version, RangeAnnotation, r, err)
	}
	return c.Check(want), nil
}
