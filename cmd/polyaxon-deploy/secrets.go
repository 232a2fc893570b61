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
