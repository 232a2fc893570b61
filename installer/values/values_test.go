package values_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func get(t *testing.T, m map[string]any, path string) any {
	t.Helper()
	v, ok := values.Lookup(m, path)
	require.True(t, ok, "path %s missing in %v", path, m)
	return v
}

func TestBuildLayeringLastWins(t *testing.T) {
	profile := map[string]any{
		"gateway":  map[string]any{"replicas": 2, "pdb": map[string]any{"enabled": true}},
		"logLevel": "INFO",
		"timeZone": "UTC",
	}
	f1 := writeFile(t, "one.yaml", "gateway:\n  replicas: 3\nlogLevel: DEBUG\nallowedHosts: [a, b]\n")
	f2 := writeFile(t, "two.yaml", "gateway:\n  replicas: 4\nallowedHosts: [c]\n")
	got, warns, err := values.BuildFiles("production", profile, values.Options{
		ValueFiles:   []string{f1, f2},
		Values:       []string{"gateway.replicas=5", "timeZone=Europe/Paris"},
		StringValues: []string{"logLevel=42"},
	})
	require.NoError(t, err)
	assert.Empty(t, warns)
	assert.EqualValues(t, 5, get(t, got, "gateway.replicas"), "--set wins over every file")
	assert.Equal(t, true, get(t, got, "gateway.pdb.enabled"), "maps merge key by key: the profile's sibling key survives")
	assert.Equal(t, []any{"c"}, get(t, got, "allowedHosts"), "lists are replaced by the later file, not appended")
	assert.Equal(t, "Europe/Paris", get(t, got, "timeZone"))
	assert.Equal(t, "42", get(t, got, "logLevel"), "--set-string keeps a string and comes after --set")
	// The profile map is not mutated by layering.
	assert.EqualValues(t, 2, profile["gateway"].(map[string]any)["replicas"])
}

func TestBuildLaterFileWins(t *testing.T) {
	f1 := writeFile(t, "one.yaml", "gateway: {replicas: 3}\n")
	f2 := writeFile(t, "two.yaml", "gateway: {replicas: 7}\n")
	got, _, err := values.BuildFiles("p", nil, values.Options{ValueFiles: []string{f1, f2}})
	require.NoError(t, err)
	assert.EqualValues(t, 7, get(t, got, "gateway.replicas"))
	got, _, err = values.BuildFiles("p", nil, values.Options{ValueFiles: []string{f2, f1}})
	require.NoError(t, err)
	assert.EqualValues(t, 3, get(t, got, "gateway.replicas"))
}

func TestBuildSetFileAndNull(t *testing.T) {
	content := writeFile(t, "ca.pem", "-----BEGIN CERTIFICATE-----\n")
	got, _, err := values.BuildFiles("p", map[string]any{"ssl": map[string]any{"enabled": true}}, values.Options{
		FileValues: []string{"ssl.ca=" + content},
		Values:     []string{"ssl.enabled=null"},
	})
	require.NoError(t, err)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", get(t, got, "ssl.ca"))
	v, ok := values.Lookup(got, "ssl.enabled")
	assert.True(t, ok)
	assert.Nil(t, v, "null is kept so Helm deletes the key when coalescing with chart defaults")
}

func TestBuildErrors(t *testing.T) {
	bad := writeFile(t, "bad.yaml", "gateway: [unclosed\n")
	cases := []struct {
		name    string
		opts    values.Options
		wantMsg []string
	}{
		{"missing file", values.Options{ValueFiles: []string{"/nonexistent/values.yaml"}},
			[]string{"values file /nonexistent/values.yaml: not found", "fix:"}},
		{"invalid yaml", values.Options{ValueFiles: []string{bad}}, []string{bad, "not valid YAML"}},
		{"set without value", values.Options{Values: []string{"gateway.replicas"}},
			[]string{`--set "gateway.replicas"`, "fix: use key=value"}},
		{"set bad index", values.Options{Values: []string{"tolerations.core[x]=1"}},
			[]string{`--set "tolerations.core[x]=1"`}},
		{"set-string without value", values.Options{StringValues: []string{"logLevel"}}, []string{"--set-string"}},
		{"set-file missing file", values.Options{FileValues: []string{"ssl.ca=/nonexistent/ca.pem"}},
			[]string{"--set-file", "/nonexistent/ca.pem not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := values.BuildFiles("p", nil, tc.opts)
			require.Error(t, err)
			for _, m := range tc.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

func TestSeedsAccepted(t *testing.T) {
	seeds, err := filepath.Glob("../../charts/testdata/seeds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, seeds, "seed fixtures missing")
	for _, s := range seeds {
		if filepath.Base(s) == "distributed-tf.yaml" {
			continue // a run topology for `plan`, not values
		}
		t.Run(filepath.Base(s), func(t *testing.T) {
			_, _, err := values.BuildFiles("production", nil, values.Options{ValueFiles: []string{s}})
			require.NoError(t, err)
		})
	}
}

// Layers are bytes with the names the user knows: nothing is read from disk, and errors and
// warnings name the user's file, whatever holds its contents now (a release's stored inputs).
func TestBuildLayersOfBytesNameTheUsersFiles(t *testing.T) {
	got, warns, err := values.Build(values.Layers{
		ProfileName: "p",
		Files:       []values.File{{Name: "/home/me/old.yaml", Content: "rbac:\n  enabled: true\n"}},
		SetFiles:    []values.File{{Name: "ssl.ca", Content: "-----BEGIN CERTIFICATE-----\n"}},
	})
	require.NoError(t, err)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", get(t, got, "ssl.ca"), "--set-file from its content")
	require.Len(t, warns, 1)
	assert.Equal(t, "/home/me/old.yaml", warns[0].Source)

	_, _, err = values.Build(values.Layers{Files: []values.File{{Name: "/home/me/broken.yaml", Content: "gateway: [\n"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "values file /home/me/broken.yaml: not valid YAML")
}

// A profile given with -f is named as one, with the flag that takes it, before any schema
// error about its keys.
func TestBuildRefusesAProfileAsValuesFile(t *testing.T) {
	f := writeFile(t, "production.yaml", "name: production\ndescription: d\nvalues:\n  gateway: {replicas: 2}\npolicy:\n  backupRequired: true\n")
	_, _, err := values.BuildFiles("production", nil, values.Options{ValueFiles: []string{f}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "values file "+f+": this is a profile")
	assert.Contains(t, err.Error(), "use --profile "+f)

	// A values file that has a chart key next to these names is a values file.
	f = writeFile(t, "odd.yaml", "values:\n  a: 1\ngateway: {replicas: 2}\n")
	_, _, err = values.BuildFiles("production", nil, values.Options{ValueFiles: []string{f}})
	require.NoError(t, err)
}
