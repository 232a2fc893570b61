package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// adopt's command-line mistakes are usage errors (exit 2), found before any cluster is read.
func TestAdoptUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		say  string
	}{
		{[]string{"adopt"}, "--from-release NAME"},
		{[]string{"adopt", "--from-release", "plx", "--purge-old-data"}, "--purge-old-data needs --remove-old"},
		{[]string{"adopt", "--from-release", "plx", "--from-official-values", "old.yaml"}, "converts the old release's own values"},
		{[]string{"adopt", "--from-release", "plx", "extra"}, "takes no arguments"},
	} {
		r := runCLI(t, nil, append([]string{"adopt", "--kubeconfig", "/nonexistent/kubeconfig"}, tc.args[1:]...)...)
		assert.Equalf(t, ExitUsage, r.code, "%v\n%s", tc.args, r.stderr)
		assert.Containsf(t, r.stderr, tc.say, "%v", tc.args)
		assert.NotContainsf(t, r.stderr, "/nonexistent/kubeconfig", "%v: no cluster read", tc.args)
	}
}
