package action

import (
	"context"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Render renders the release offline, like `helm template`: every object, or only those of
// ShowOnly's templates.
type Render struct {
	Env
	Given    Given
	Render   render.Options
	ShowOnly []string
	// ValuesOnly returns the merged values instead of the manifests.
	ValuesOnly bool
}

// RenderResult are the inputs, and the rendered objects in install order (CRDs, objects,
// hooks), the chart's notes, and the warning that an offline render generated new secrets
// ("" when it did not); or, with ValuesOnly, the merged values.
type RenderResult struct {
	Inputs         *Inputs
	Manifests      []render.Manifest
	Notes          string
	OfflineSecrets string
	// Values are the merged values Helm would render with (chart defaults < profile < -f <
	// --set), their secrets masked like every other result.
	Values map[string]any
}

// Run loads the inputs and renders the manifests (or the values).
func (a *Render) Run(ctx context.Context) (*RenderResult, error) {
	in, err := a.load(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	res := &RenderResult{Inputs: in}
	if a.ValuesOnly {
		merged, err := render.MergedValues(in.Chart, in.Values)
		if err != nil {
			return nil, err
		}
		res.Values = redact.Values(merged)
		return res, nil
	}
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
