package main

// The inputs of a render: the chart (embedded, --chart), the profile and the user's values,
// read once into contents (stored with a release) and layered by installer/action.

import (
	"fmt"
	"io"
	"os"
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
	raw, err := readInputs(c, true)
	if err != nil {
		return nil, err
	}
	in, err := buildInputs(c, raw)
	if err != nil {
		return nil, err
	}
	for _, w := range in.Warnings {
		debugf(c, "values warning: %s", w)
	}
	return in, nil
}

// buildInputs loads the command's chart and layers inputs held as contents (this run's, or
// stored with the release) over their profile.
func buildInputs(c *cli.Context, raw release.Inputs) (*action.Inputs, error) {
	ch, err := loadChart(c)
	if err != nil {
		return nil, err
	}
	in, err := action.LoadInputs(ch.Chart, ch.Source, raw, envOf(c).scrub)
	if err != nil {
		return nil, err
	}
	in.Warnings = append(officialWarnings(c), in.Warnings...)
	return in, nil
}

// readInputs reads this run's inputs with the contents of every file (they are stored with the
// release: an upgrade months later must not depend on the files still being there). The
// profile is read only when given (install: always, with its default).
func readInputs(c *cli.Context, install bool) (release.Inputs, error) {
	var in release.Inputs
	if install || c.IsSet(flagProfile) {
		in.Profile = c.String(flagProfile)
		if isProfilePath(in.Profile) {
			data, err := os.ReadFile(in.Profile)
			if err != nil {
				_, perr := profile.Load(in.Profile) // its message names the fix
				return in, firstErr(perr, err)
			}
			in.ProfileFile = &release.ValuesFile{Name: in.Profile, Content: string(data)}
		}
	}
	stdinUsed := false
	for _, f := range c.StringSlice(flagValues) {
		var data []byte
		var err error
		if strings.TrimSpace(f) == "-" {
			if stdinUsed {
				return in, usageErrorf("-f - (stdin) given twice")
			}
			stdinUsed = true
			data, err = io.ReadAll(os.Stdin)
		} else if data, err = os.ReadFile(f); err != nil {
			_, verr := values.ReadFile(f) // its message names the fix
			return in, firstErr(verr, err)
		}
		if err != nil {
			return in, fmt.Errorf("values file %s: %w", f, err)
		}
		// A file that is not values (bad YAML, a profile) is refused before the cluster is asked.
		if _, err := values.ParseFile(values.File{Name: f, Data: data}); err != nil {
			return in, err
		}
		in.ValuesFiles = append(in.ValuesFiles, release.ValuesFile{Name: f, Content: string(data)})
	}
	layer, warns, err := officialLayer(c)
	if err != nil {
		return in, err
	}
	if layer != nil {
		in.ValuesFiles = append([]release.ValuesFile{*layer}, in.ValuesFiles...)
		c.App.Metadata[officialWarningsKey] = warns
	}
	if err := checkSetArgs(c); err != nil {
		return in, err
	}
	in.Set = c.StringSlice(flagSet)
	in.SetString = c.StringSlice(flagSetString)
	pairs, err := setFilePairs(c.StringSlice(flagSetFile))
	if err != nil {
		return in, err
	}
	for _, p := range pairs {
		data, err := os.ReadFile(p.path)
		if err != nil {
			return in, fmt.Errorf("--set-file %s=%s: %w (fix: check the path)", p.key, p.path, err)
		}
		in.SetFile = append(in.SetFile, release.ValuesFile{Name: p.key, Content: string(data)})
	}
	return in, nil
}

func isProfilePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
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
