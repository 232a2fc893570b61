package main

// Keeping secrets out of what the CLI prints: every stream (stdout results, stderr progress and
// errors, the debug log) goes through the command's redact.Scrubber, which learns the secret
// values of the run as soon as they are known: from the inputs, then from the Secrets the
// chart renders (installer/action teaches it). Warnings and merged values are masked by path
// at the source (installer/values, installer/redact). Here: the command line itself.

import (
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

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
