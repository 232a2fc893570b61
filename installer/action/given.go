package action

// The user's inputs as the command line names them, and the one loader every action that
// renders reads them with: the files' contents (stored with a release), the chart, then the
// profile with the values layered over it (inputs.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Given are the user's inputs as given: names, paths and flag arguments, nothing read yet.
// Every action that renders takes them and loads them the same way (Env.load).
type Given struct {
	// Profile is a profile's name or a profile file's path; "" gives none (an upgrade keeps
	// the stored one).
	Profile string
	// Values are the -f paths, in order ("-" is stdin).
	Values []string
	// Set and SetString are the --set and --set-string arguments; SetFile the --set-file
	// ones (key=path).
	Set, SetString, SetFile []string
	// Official converts a values file of the official chart into a layer beneath Values.
	Official Official
	// Chart says where the chart comes from (the embedded one by default).
	Chart chartsource.Options
}

// Official is a values file written for the official polyaxon/polyaxon chart
// (--from-official-values), and how it is converted.
type Official struct {
	// File is its path ("-" is stdin; "": none).
	File string
	// AllowUnmapped goes on when keys of the official chart cannot be expressed in ours.
	AllowUnmapped bool
	// KeepDefaults converts the values equal to the official chart's defaults too; else those
	// of Version's defaults are left out.
	KeepDefaults bool
	Version      string
}

// loaded are the inputs read from disk and the chart, before they are layered: what an
// upgrade layers over the stored inputs and adopt beneath the old release's values.
type loaded struct {
	given    release.Inputs
	warnings []values.Warning
	chart    *chartsource.Chart
}

// load reads the inputs, loads the chart and layers the values over the profile, then shows
// the migration warnings: what install, check, render and plan render.
func (e *Env) load(ctx context.Context, g Given) (*Inputs, error) {
	l, err := e.read(ctx, g)
	if err != nil {
		return nil, err
	}
	return e.build(l, l.given)
}

// read reads the inputs with the contents of every file (they are stored with the release:
// an upgrade months later must not depend on the files still being there), then loads the
// chart: a wrong reference or registry fails before the cluster is asked anything.
func (e *Env) read(ctx context.Context, g Given) (*loaded, error) {
	in, warns, err := e.readFiles(g)
	if err != nil {
		return nil, err
	}
	ch, err := e.LoadChart(ctx, g.Chart)
	if err != nil {
		return nil, err
	}
	return &loaded{given: in, warnings: warns, chart: ch}, nil
}

// build layers given (this run's inputs, or these over the stored ones) over their profile
// and shows the warnings, the reading's first.
func (e *Env) build(l *loaded, given release.Inputs) (*Inputs, error) {
	in, err := LoadInputs(l.chart.Chart, l.chart.Source, given, e.Secrets)
	if err != nil {
		return nil, err
	}
	in.Warnings = append(append([]values.Warning(nil), l.warnings...), in.Warnings...)
	for _, w := range in.Warnings {
		e.debugf("values warning: %s", w)
		e.progress().Warn(w.String())
	}
	return in, nil
}

// readFiles reads the profile file, the -f files, the official values file and the
// --set-file files. The warnings are those of converting the official values file.
func (e *Env) readFiles(g Given) (in release.Inputs, warns []values.Warning, err error) {
	in.Profile = g.Profile
	if profile.IsPath(in.Profile) {
		data, err := profile.ReadFile(in.Profile)
		if err != nil {
			return in, nil, err
		}
		in.ProfileFile = &values.File{Name: in.Profile, Content: string(data)}
	}
	stdinUsed := false
	for _, path := range g.Values {
		if strings.TrimSpace(path) == "-" {
			if stdinUsed {
				return in, nil, &UsageError{Err: errors.New("-f - (stdin) given twice")}
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
	layer, warns, err := e.officialLayer(g.Official)
	if err != nil {
		return in, nil, err
	}
	if layer != nil {
		in.ValuesFiles = append([]values.File{*layer}, in.ValuesFiles...)
	}
	if err := checkSetArgs(g); err != nil {
		return in, nil, err
	}
	in.Set, in.SetString = g.Set, g.SetString
	pairs, err := values.SetFilePairs(g.SetFile)
	if err != nil {
		return in, nil, &UsageError{Err: err}
	}
	if in.SetFile, err = values.ReadSetFiles(pairs); err != nil {
		return in, nil, err
	}
	return in, warns, nil
}

// checkSetArgs refuses --set/--set-string arguments that strvals would silently ignore (empty,
// or a pair without a key): a usage error, before anything is read. Helm's parser reads them
// afterwards; --set-file is split once, by values.SetFilePairs.
func checkSetArgs(g Given) error {
	for _, flag := range []struct {
		name string
		args []string
	}{{"set", g.Set}, {"set-string", g.SetString}} {
		for _, a := range flag.args {
			if _, err := values.SplitSetArg(a); err != nil {
				return &UsageError{Err: fmt.Errorf("--%s %q: %v", flag.name, values.RedactSetArg(a), err)}
			}
		}
	}
	return nil
}

// officialLayer converts the official values file into a values file to layer beneath this
// run's -f files, with the warnings to show. nil when there is none.
func (e *Env) officialLayer(o Official) (*values.File, []values.Warning, error) {
	if o.File == "" {
		return nil, nil, nil
	}
	res, err := e.ConvertOfficial(o)
	if err != nil {
		return nil, nil, err
	}
	if err := res.Check(o.File, o.AllowUnmapped); err != nil {
		return nil, nil, err
	}
	b, err := res.YAML()
	if err != nil {
		return nil, nil, err
	}
	name := o.File + " (converted from the official chart)"
	return &values.File{Name: name, Content: string(b)}, res.Warnings(o.File), nil
}

// ConvertOfficial reads and converts a values file of the official chart (convert-values,
// --from-official-values). Only what is carried over is a secret of this run: the official
// chart's well-known default passwords are dropped, and masking them would garble every key
// name.
func (e *Env) ConvertOfficial(o Official) (*convert.Result, error) {
	var data []byte
	var err error
	if strings.TrimSpace(o.File) == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(o.File)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("values file %s: not found (fix: check the path)", o.File)
	}
	if err != nil {
		return nil, fmt.Errorf("values file %s: %w", o.File, err)
	}
	in, err := chartutil.ReadValues(data)
	if err != nil {
		return nil, fmt.Errorf("values file %s: not valid YAML: %w", o.File, err)
	}
	var opts []convert.Option
	if !o.KeepDefaults {
		d, err := convert.OfficialDefaults(o.Version)
		if err != nil {
			return nil, &UsageError{Err: fmt.Errorf("--official-chart-version %s: %v", o.Version, err)}
		}
		opts = append(opts, convert.WithDefaults(o.Version, d))
	}
	res := convert.Convert(in, opts...)
	e.Secrets.Add(redact.Secrets(res.Values)...)
	return res, nil
}

// LoadChart loads the chart (a registry pull included). Options that do not fit together are
// a *UsageError.
func (e *Env) LoadChart(ctx context.Context, o chartsource.Options) (*chartsource.Chart, error) {
	if err := o.Validate(); err != nil {
		return nil, &UsageError{Err: err}
	}
	if chartsource.IsOCI(o.Ref) {
		what := o.Ref
		if o.Version != "" {
			what += " version " + o.Version
		}
		e.progress().Step("Pulling chart " + what)
	}
	ch, err := chartsource.Load(ctx, o)
	if err != nil {
		return nil, err
	}
	if ch.Digest != "" {
		e.progress().OK(fmt.Sprintf("Pulled chart %s %s (%s)", ch.Metadata.Name, ch.Metadata.Version, strings.TrimPrefix(ch.Source, "oci://")))
	}
	e.debugf("chart %s %s from %s", ch.Metadata.Name, ch.Metadata.Version, ch.Source)
	return ch, nil
}
