package main

// The inputs of a render: the chart (embedded, --chart), the profile and the user's values,
// read once into contents (stored with a release) and layered by installer/action.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// startInputsCommand is how every command that renders this run's inputs begins (check,
// render): the result printer, then the chart, profile and layered values. The input
// migration warnings are already on stderr when it returns, so they come before any progress.
// Rendering is left to the caller: each command renders with its own options.
func startInputsCommand(c *cli.Context) (*output.Printer, *action.Inputs, error) {
	p, err := printer(c)
	if err != nil {
		return nil, nil, err
	}
	in, err := loadInputs(c)
	if err != nil {
		return nil, nil, err
	}
	warnInputs(c, in)
	return p, in, nil
}

// loadInputs loads the chart (embedded or --chart), the profile and this run's values layered
// over it. Errors say what to fix (an unknown profile lists the known ones; a missing file
// names it).
func loadInputs(c *cli.Context) (*action.Inputs, error) {
	raw, warns, err := readInputs(c, true)
	if err != nil {
		return nil, err
	}
	in, err := buildInputs(c, raw, warns)
	if err != nil {
		return nil, err
	}
	for _, w := range in.Warnings {
		debugf(c, "values warning: %s", w)
	}
	return in, nil
}

// buildInputs loads the command's chart and layers inputs held as contents (this run's, or
// stored with the release) over their profile; warns are readInputs' warnings.
func buildInputs(c *cli.Context, raw release.Inputs, warns []values.Warning) (*action.Inputs, error) {
	ch, err := loadChart(c)
	if err != nil {
		return nil, err
	}
	in, err := action.LoadInputs(ch.Chart, ch.Source, raw, envOf(c).scrub)
	if err != nil {
		return nil, err
	}
	in.Warnings = append(warns, in.Warnings...)
	return in, nil
}

// readInputs reads this run's inputs with the contents of every file (they are stored with the
// release: an upgrade months later must not depend on the files still being there). The
// profile is read only when given (install: always, with its default). The warnings are those
// of converting an official chart's values file.
func readInputs(c *cli.Context, install bool) (in release.Inputs, warns []values.Warning, err error) {
	if install || c.IsSet(flagProfile) {
		in.Profile = c.String(flagProfile)
		if profile.IsPath(in.Profile) {
			data, err := profile.ReadFile(in.Profile)
			if err != nil {
				return in, nil, err
			}
			in.ProfileFile = &values.File{Name: in.Profile, Content: string(data)}
		}
	}
	stdinUsed := false
	for _, path := range c.StringSlice(flagValues) {
		if strings.TrimSpace(path) == "-" {
			if stdinUsed {
				return in, nil, usageErrorf("-f - (stdin) given twice")
			}
			stdinUsed = true
		}
		f, err := values.Read(path)
		if err != nil {
			return in, nil, err
		}
		// A file that is not values (bad YAML, a profile) is refused before the cluster is asked.
		if _, err := values.ParseFile(f); err != nil {
			return in, nil, err
		}
		in.ValuesFiles = append(in.ValuesFiles, f)
	}
	layer, warns, err := officialLayer(c)
	if err != nil {
		return in, nil, err
	}
	if layer != nil {
		in.ValuesFiles = append([]values.File{*layer}, in.ValuesFiles...)
	}
	if err := checkSetArgs(c); err != nil {
		return in, nil, err
	}
	in.Set = c.StringSlice(flagSet)
	in.SetString = c.StringSlice(flagSetString)
	pairs, err := setFilePairs(c.StringSlice(flagSetFile))
	if err != nil {
		return in, nil, err
	}
	for _, p := range pairs {
		f, err := values.ReadSetFile(p.key, p.path)
		if err != nil {
			return in, nil, fmt.Errorf("--set-file %s=%s: %w", p.key, p.path, err)
		}
		in.SetFile = append(in.SetFile, f)
	}
	return in, warns, nil
}

// checkSetArgs refuses --set/--set-string/--set-file arguments that strvals would silently
// ignore (empty, or a pair without a key): a usage error, before anything is read.
func checkSetArgs(c *cli.Context) error {
	for _, flag := range []string{flagSet, flagSetString} {
		for _, a := range c.StringSlice(flag) {
			if _, err := values.SplitSetArg(a); err != nil {
				return usageErrorf("--%s %q: %v", flag, values.RedactSetArg(a), err)
			}
		}
	}
	_, err := setFilePairs(c.StringSlice(flagSetFile))
	return err
}

// warnInputs prints legacy-input warnings as human progress on stderr.
func warnInputs(c *cli.Context, in *action.Inputs) {
	for _, w := range in.Warnings {
		progress(c).Warn(w.String())
	}
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
