package main

// Keeping secrets out of what the CLI prints: every stream (stdout results, stderr progress and
// errors, the debug log) goes through the command's redact.Scrubber, which learns the secret
// values of the run as soon as they are known: from the inputs (files, --set, --set-file,
// stored inputs), then from the Secrets the chart renders. Warnings and merged values are
// masked by path at the source (installer/values, installer/redact).

import (
	"encoding/base64"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// scrubber is the command's Scrubber.
func scrubber(c *cli.Context) *redact.Scrubber { return envOf(c).scrub }

// noteValueSecrets teaches the scrubber the secret values of a values tree.
func noteValueSecrets(c *cli.Context, vals map[string]any) {
	scrubber(c).Add(redact.Secrets(vals)...)
}

// noteYAMLSecrets teaches the scrubber the secrets of a values document; a document that does
// not parse is reported by values.Build, not here.
func noteYAMLSecrets(c *cli.Context, content string) {
	if vals, err := chartutil.ReadValues([]byte(content)); err == nil {
		noteValueSecrets(c, vals)
	}
}

// noteSetSecrets teaches the scrubber the secrets of --set/--set-string arguments and of
// --set-file files whose key is secret-like (their content is the secret).
func noteSetSecrets(c *cli.Context, sets, setStrings []string, setFiles map[string]string) {
	scrubber(c).Add(values.SetSecrets(sets)...)
	scrubber(c).Add(values.SetSecrets(setStrings)...)
	for key, content := range setFiles {
		if redact.IsSecretPath(key) {
			scrubber(c).Add(content)
		}
	}
}

// noteOptionSecrets reads the secrets of this run's inputs given as paths (render, check,
// plan), before values.Build can fail with a message that quotes them. Stdin (-f -) is
// covered after Build, from the merged values.
func noteOptionSecrets(c *cli.Context, o values.Options) {
	for _, f := range o.ValueFiles {
		if strings.TrimSpace(f) == "-" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil {
			noteYAMLSecrets(c, string(b))
		}
	}
	files := map[string]string{}
	for _, a := range o.FileValues {
		for _, p := range splitPairsQuiet(a) {
			if b, err := os.ReadFile(p.path); err == nil {
				files[p.key] = string(b)
			}
		}
	}
	noteSetSecrets(c, o.Values, o.StringValues, files)
}

// noteInputSecrets does the same for inputs held as contents (install, upgrade, stored inputs).
func noteInputSecrets(c *cli.Context, in release.Inputs) {
	if in.ProfileFile != nil {
		noteYAMLSecrets(c, in.ProfileFile.Content)
	}
	for _, f := range in.ValuesFiles {
		noteYAMLSecrets(c, f.Content)
	}
	files := map[string]string{}
	for _, f := range in.SetFile {
		files[f.Name] = f.Content
	}
	noteSetSecrets(c, in.Set, in.SetString, files)
}

// noteRenderedSecrets teaches the scrubber every value that lands in a rendered Secret
// (generated passwords included): anything printed outside the Secret itself is a leak. Keys
// that name an identity (a user name, a host) are left out: masking "polyaxon" everywhere
// would hide nothing and garble every message.
func noteRenderedSecrets(c *cli.Context, ms []render.Manifest) {
	for _, m := range ms {
		if m.Kind() != "Secret" || m.Object == nil {
			continue
		}
		if data, ok := m.Object.Object["data"].(map[string]any); ok {
			for k, v := range data {
				if s, ok := v.(string); ok && !redact.IsIdentityKey(k) {
					if b, err := base64.StdEncoding.DecodeString(s); err == nil {
						scrubber(c).Add(string(b))
					}
				}
			}
		}
		if data, ok := m.Object.Object["stringData"].(map[string]any); ok {
			for k, v := range data {
				if s, ok := v.(string); ok && !redact.IsIdentityKey(k) {
					scrubber(c).Add(s)
				}
			}
		}
	}
}

// redactArgs masks the secret values of --set and --set-string arguments in a command line
// (the debug log records it).
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		name, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != flagSet && name != flagSetString) {
			continue
		}
		if inline {
			out[i] = a[:len(a)-len(value)] + values.RedactSetArg(value)
			continue
		}
		if i+1 < len(out) {
			out[i+1] = values.RedactSetArg(out[i+1])
			i++
		}
	}
	return out
}

type setFilePair struct{ key, path string }

// setFilePairs splits --set-file arguments into key and path (unescaped, as Helm reads it),
// refusing empty arguments and pairs without a key or a path.
func setFilePairs(args []string) ([]setFilePair, error) {
	var out []setFilePair
	for _, a := range args {
		pairs, err := values.SplitSetArg(a)
		if err != nil {
			return nil, usageErrorf("--%s %q: %v", flagSetFile, a, err)
		}
		for _, p := range pairs {
			if !p.Assigned || strings.TrimSpace(p.Value) == "" {
				return nil, usageErrorf("--%s %q: want key=path", flagSetFile, a)
			}
			out = append(out, setFilePair{key: p.Key, path: values.Unescape(p.Value)})
		}
	}
	return out, nil
}

func splitPairsQuiet(arg string) []setFilePair {
	ps, _ := setFilePairs([]string{arg})
	return ps
}
