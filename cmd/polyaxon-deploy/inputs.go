package main

// The inputs of a render as the command line gives them (the chart, the profile and the
// user's values, by name and path): installer/action reads and layers them.

import (
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// givenOf are this run's inputs as its flags give them. The profile is given only when set,
// unless withProfile (install: always, with its default; an upgrade keeps the stored one).
func givenOf(c *cli.Context, withProfile bool) action.Given {
	g := action.Given{
		Values: c.StringSlice(flagValues), Set: c.StringSlice(flagSet), SetString: c.StringSlice(flagSetString), SetFile: c.StringSlice(flagSetFile),
		Official: officialOf(c, c.String(flagFromOfficial)),
		Chart:    chartOptions(c),
	}
	if withProfile || c.IsSet(flagProfile) {
		g.Profile = c.String(flagProfile)
	}
	return g
}

// releaseOptions returns the render options for this command's release and namespace.
func releaseOptions(c *cli.Context) render.Options {
	return render.Options{ReleaseName: c.String(flagRelease), Namespace: c.String(flagNamespace)}
}

// resultWithWarnings starts a result carrying the input migration warnings.
func resultWithWarnings(command string, in *action.Inputs) *output.Result {
	r := output.NewResult(command, output.StatusOK)
	for _, w := range in.Warnings {
		r.Warnings = append(r.Warnings, w.String())
	}
	if len(r.Warnings) > 0 {
		r.Status = output.StatusWarning
	}
	r.Release = &output.Release{Profile: in.Profile.Name, Chart: in.Chart.Metadata.Name + "-" + in.Chart.Metadata.Version,
		ChartVersion: in.Chart.Metadata.Version, AppVersion: polyaxonversion.Of(in.Chart.Metadata, in.Values)}
	return r
}
