package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errorLine is the "Error: ..." line finish prints, without the debug log path that follows.
func errorLine(t *testing.T, stderr string) string {
	t.Helper()
	i := strings.Index(stderr, "Error: ")
	require.GreaterOrEqual(t, i, 0, stderr)
	line, _, _ := strings.Cut(stderr[i:], "\n")
	if j := strings.Index(stderr, "Debug log: "); j >= 0 {
		path, _, _ := strings.Cut(stderr[j+len("Debug log: "):], "\n")
		_ = os.Remove(path)
	}
	return line
}

// check and render begin the same way (their actions load the inputs with the one loader):
// -o is validated before any input is read, a bad input fails both alike before check reaches
// the cluster, and the input migration warnings come first on stderr.
func TestCheckAndRenderStartAlike(t *testing.T) {
	for _, cmd := range []string{"check", "render"} {
		r := runCLI(t, nil, cmd, "-o", "xml", "--profile", "prod")
		assert.Equal(t, ExitUsage, r.code, r.stderr)
		assert.NotContains(t, r.stderr, "unknown profile", "%s: -o is checked first", cmd)
	}

	badProfile := []string{"--profile", "prod", "--kubeconfig", "/nonexistent"}
	chk := runCLI(t, nil, append([]string{"check", "--pre"}, badProfile...)...)
	ren := runCLI(t, nil, append([]string{"render"}, badProfile[:2]...)...)
	require.Equal(t, ExitError, chk.code, chk.stderr)
	require.Equal(t, ExitError, ren.code, ren.stderr)
	assert.Equal(t, errorLine(t, ren.stderr), errorLine(t, chk.stderr))
	assert.Contains(t, chk.stderr, `unknown profile "prod"`)
	assert.NotContains(t, chk.stderr, "[kube-api]", "no check ran")

	seed := "../../charts/testdata/seeds/production-node-pools.yaml"
	ren = runCLI(t, nil, "render", "-f", seed)
	require.Equal(t, ExitOK, ren.code, ren.stderr)
	require.NotEmpty(t, ren.stderr, "the seed has a legacy spelling")
	chk = runCLI(t, productionCluster(t), "check", "--pre", "-f", seed)
	require.Equal(t, ExitOK, chk.code, chk.stderr)
	// render adds its own warning about secrets generated offline after the input warnings.
	inputWarnings, _, _ := strings.Cut(ren.stderr, "‼ rendered without cluster access")
	assert.True(t, strings.HasPrefix(chk.stderr, inputWarnings), "check prints the same warnings before its progress:\n%s", chk.stderr)
}

// A profile file given with -f is named as a profile, with the flag that takes it, before the
// cluster is asked anything (the kubeconfig does not exist) and before any schema error.
func TestProfileGivenAsValuesFile(t *testing.T) {
	const prof = "../../profiles/production.yaml"
	for _, args := range [][]string{
		{"render", "-f", prof},
		{"install", "-f", prof, "--kubeconfig", "/nonexistent"},
		{"upgrade", "-f", prof, "--kubeconfig", "/nonexistent"},
		{"check", "-f", prof, "--kubeconfig", "/nonexistent"},
	} {
		r := runCLI(t, nil, args...)
		require.Equal(t, ExitError, r.code, "%v: %s", args, r.stderr)
		line := errorLine(t, r.stderr)
		assert.Contains(t, line, "values file "+prof+": this is a profile", args)
		assert.Contains(t, line, "use --profile "+prof, args)
		assert.NotContains(t, r.stderr, "additional properties", args)
		assert.NotContains(t, r.stderr, "nonexistent", "%v: refused before the cluster", args)
	}
}
