package action

import (
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Inputs are what a release is rendered from: the chart, the profile, and the user's values
// layered over it.
type Inputs struct {
	Chart *chart.Chart
	// ChartSource is "embedded", the --chart path, or the pulled oci:// reference.
	ChartSource string
	Profile     *profile.Profile
	// Given are the user's inputs as given, contents included: stored with the release, so
	// that an upgrade re-renders from them.
	Given release.Inputs
	// Values = profile < files < --set: what is handed to Helm (the chart has its defaults).
	Values map[string]any
	// Warnings are the migrations of older spellings, to show to the user.
	Warnings []values.Warning
}

// LoadInputs loads the profile given names (or holds, for a profile file) and layers given's
// files and --set values over it, from the contents given holds: stored inputs replay as they
// were, and messages name the user's files. secrets learns every secret value on the way.
func LoadInputs(ch *chart.Chart, chartSource string, given release.Inputs, secrets *redact.Scrubber) (*Inputs, error) {
	secrets.Add(secretsOf(given)...)
	in := &Inputs{Chart: ch, ChartSource: chartSource, Given: given}
	var err error
	if in.Profile, err = profileOf(given); err != nil {
		return nil, err
	}
	secrets.Add(redact.Secrets(in.Profile.Values)...)
	in.Values, in.Warnings, err = values.Build(layersOf(in.Profile, given))
	if err != nil {
		return nil, err
	}
	secrets.Add(redact.Secrets(in.Values)...)
	return in, nil
}

// profileOf loads the profile given names, or holds (a profile file).
func profileOf(given release.Inputs) (*profile.Profile, error) {
	if f := given.ProfileFile; f != nil {
		return profile.ParseFile(f.Name, []byte(f.Content))
	}
	return profile.Load(given.Profile)
}

// layersOf are the value layers of given over the profile p.
func layersOf(p *profile.Profile, given release.Inputs) values.Layers {
	l := values.Layers{ProfileName: p.Name, Profile: p.Values, Set: given.Set, SetString: given.SetString}
	l.Files, l.SetFiles = given.ValuesFiles, given.SetFile
	return l
}

// secretsOf are the secret values in the user's inputs, found before they are parsed so that
// no message (a YAML error quoting a line) can show one: the secret keys of each document,
// the secret keys of --set and --set-string, and the contents of --set-file files whose key is
// secret-like. A document that does not parse is reported by values.Build, not here.
func secretsOf(in release.Inputs) []string {
	var out []string
	docs := in.ValuesFiles
	if in.ProfileFile != nil {
		docs = append([]values.File{*in.ProfileFile}, docs...)
	}
	for _, f := range docs {
		if vals, err := chartutil.ReadValues([]byte(f.Content)); err == nil {
			out = append(out, redact.Secrets(vals)...)
		}
	}
	out = append(out, values.SetSecrets(in.Set)...)
	out = append(out, values.SetSecrets(in.SetString)...)
	for _, f := range in.SetFile {
		if redact.IsSecretPath(f.Name) {
			out = append(out, f.Content)
		}
	}
	return out
}
