package action

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

const officialExample = "../convert/testdata/official-values-example.yaml"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestStoredInputsRebuildWithoutTheOriginalFiles(t *testing.T) {
	var e Env
	ctx := context.Background()
	f := writeFile(t, "prod.yaml", "gateway:\n  replicas: 4\n")
	l, err := e.read(ctx, Given{Profile: "development", Values: []string{f}, Set: []string{"gateway.pdb.enabled=true"}})
	require.NoError(t, err)
	raw := l.given
	assert.Equal(t, "development", raw.Profile)
	require.Len(t, raw.ValuesFiles, 1)
	assert.Equal(t, f, raw.ValuesFiles[0].Name)
	assert.Equal(t, "gateway:\n  replicas: 4\n", raw.ValuesFiles[0].Content)
	require.NoError(t, os.Remove(f)) // months later: the file is gone

	// An upgrade with one more --set: the stored file still applies, the new --set on top.
	now, err := e.read(ctx, Given{Set: []string{"gateway.replicas=5"}})
	require.NoError(t, err)
	assert.Empty(t, now.given.Profile, "an upgrade without --profile keeps the stored one")
	in, err := e.build(now, raw.Layer(now.given, false))
	require.NoError(t, err)
	assert.Equal(t, "development", in.Profile.Name)
	v, _ := values.Lookup(in.Values, "gateway.replicas")
	assert.EqualValues(t, 5, v)
	v, _ = values.Lookup(in.Values, "gateway.pdb.enabled")
	assert.Equal(t, true, v)
	assert.Equal(t, f, in.Given.ValuesFiles[0].Name, "messages and output name the user's file")

	in2, err := e.build(now, raw.Layer(now.given, true))
	require.NoError(t, err)
	v, _ = values.Lookup(in2.Values, "gateway.pdb.enabled")
	assert.NotEqual(t, true, v, "--reset-values drops the stored --set")
}

func TestStoredInputErrorsNameTheOriginalFile(t *testing.T) {
	var e Env
	l, err := e.read(context.Background(), Given{})
	require.NoError(t, err)
	raw := release.Inputs{Profile: "production", ValuesFiles: []values.File{{Name: "/home/me/broken.yaml", Content: "gateway: [\n"}}}
	_, err = e.build(l, raw)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/home/me/broken.yaml")
	assert.NotContains(t, err.Error(), "polyaxon-deploy-inputs-", "no temporary path leaks into messages")
}

func TestReadInputsMissingFileNamesTheFix(t *testing.T) {
	var e Env
	_, err := e.read(context.Background(), Given{Profile: "production", Values: []string{"/nonexistent/values.yaml"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/values.yaml")
	assert.Contains(t, err.Error(), "fix")
}

// install and upgrade store the converted layer with the release, beneath the -f files, so
// an upgrade months later replays it without the official file.
func TestFromOfficialValuesIsStoredWithTheInputs(t *testing.T) {
	var e Env
	over := writeFile(t, "mine.yaml", "gateway:\n  replicas: 5\n")
	l, err := e.read(context.Background(), Given{Profile: "development", Values: []string{over},
		Official: Official{File: officialExample, Version: "2.15.1"}})
	require.NoError(t, err)
	raw := l.given
	require.Len(t, raw.ValuesFiles, 2)
	assert.Equal(t, officialExample+" (converted from the official chart)", raw.ValuesFiles[0].Name, "the converted layer comes first")
	assert.Contains(t, raw.ValuesFiles[0].Content, "host: polyaxon.example.com", "stored converted, not as the official file")
	in, err := e.build(l, raw)
	require.NoError(t, err)
	n, _ := values.Lookup(in.Values, "gateway.replicas")
	assert.EqualValues(t, 5, n)
	assert.NotEmpty(t, in.Warnings, "the conversion's warnings reach the command")
}

// The loader refuses, as usage errors, what the command line got wrong before reading a file:
// a --set without a key, a --set-file without a path, an unknown official chart version.
func TestGivenUsageErrors(t *testing.T) {
	var e Env
	for _, g := range []Given{
		{Set: []string{"=x"}},
		{SetString: []string{""}},
		{SetFile: []string{"key"}},
		{SetFile: []string{"key= "}},
		{Official: Official{File: officialExample, Version: "0.0.1"}},
	} {
		_, err := e.read(context.Background(), g)
		var ue *UsageError
		assert.ErrorAs(t, err, &ue, "%+v", g)
	}
}
