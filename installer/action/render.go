package action

import (
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Render renders the release offline, like `helm template`: every object, or only those of
// ShowOnly's templates.
type Render struct {
	Env
	Inputs   *Inputs
	Render   render.Options
	ShowOnly []string
}

// RenderResult are the rendered objects in install order (CRDs, objects, hooks), the chart's
// notes, and the warning that an offline render generated new secrets ("" when it did not).
type RenderResult struct {
	Manifests      []render.Manifest
	Notes          string
	OfflineSecrets string
}

// Run renders the manifests.
func (a *Render) Run() (*RenderResult, error) {
	in, res := a.Inputs, &RenderResult{}
	if len(a.ShowOnly) > 0 {
		for _, t := range a.ShowOnly {
			ms, err := render.RenderTemplate(in.Chart, in.Values, a.Render, t)
			if err != nil {
				return nil, err
			}
			res.Manifests = append(res.Manifests, ms...)
		}
	} else {
		r, err := render.Render(in.Chart, in.Values, a.Render)
		if err != nil {
			return nil, err
		}
		res.Manifests, res.Notes = r.All(), r.Notes
	}
	a.debugf("rendered %d objects from chart %s (%s), profile %s", len(res.Manifests), in.Chart.Metadata.Version, in.ChartSource, in.Profile.Name)
	a.Secrets.Add(render.SecretValues(res.Manifests)...)
	merged, err := render.MergedValues(in.Chart, in.Values)
	if err != nil {
		return nil, err
	}
	typed, err := chartvalues.Of(merged)
	if err != nil {
		return nil, err
	}
	if res.OfflineSecrets = render.OfflineSecretsWarning(typed, res.Manifests); res.OfflineSecrets != "" {
		a.progress().Warn(res.OfflineSecrets)
	}
	return res, nil
}

// Values are the merged values Helm would render with (chart defaults < profile < -f <
// --set), their secrets masked like every other result.
func (a *Render) Values() (map[string]any, error) {
	merged, err := render.MergedValues(a.Inputs.Chart, a.Inputs.Values)
	if err != nil {
		return nil, err
	}
	return redact.Values(merged), nil
}
