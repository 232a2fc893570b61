package profile_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
)

func TestEmbeddedProfiles(t *testing.T) {
	names := profile.Names()
	require.Contains(t, names, "production")
	require.Contains(t, names, "development")
	for _, n := range names {
		p, err := profile.Load(n)
		require.NoError(t, err, n)
		assert.Equal(t, n, p.Name)
		assert.Equal(t, "embedded", p.Source)
		assert.NotEmpty(t, p.Description, "%s: describe the profile", n)
		assert.NotEmpty(t, p.Policy.PodSecurityLevel, n)
	}
	prod, err := profile.Load("")
	require.NoError(t, err)
	assert.Equal(t, profile.Default, prod.Name)
	assert.True(t, prod.Policy.BackupRequired)
	assert.GreaterOrEqual(t, prod.Policy.MinGatewayReplicas, 2)
	assert.True(t, prod.Policy.IsFatal("kube-api"))
	assert.Equal(t, 15*time.Minute, prod.Policy.TimeoutOrDefault())
}

func TestUnknownProfileListsKnown(t *testing.T) {
	_, err := profile.Load("prod")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown profile "prod"`)
	assert.Contains(t, err.Error(), "development, production")

	_, err = profile.Load("../etc/passwd")
	require.Error(t, err, "a relative path that does not exist is a missing file, not a traversal")
	assert.Contains(t, err.Error(), "profile file ../etc/passwd")
}

func TestStrictPolicy(t *testing.T) {
	fsys := fstest.MapFS{
		"typo.yaml":     {Data: []byte("policy:\n  fatalCheck: [kube-api]\n")},
		"toplevel.yaml": {Data: []byte("valeus: {}\n")},
		"level.yaml":    {Data: []byte("policy: {podSecurityLevel: strict}\n")},
		"timeout.yaml":  {Data: []byte("policy: {timeout: soon}\n")},
		"ok.yaml":       {Data: []byte("name: ok\nvalues: {gateway: {replicas: 3}}\npolicy: {timeout: 90s, ignoreChecks: [gpu-capacity]}\n")},
		"named.yaml":    {Data: []byte("name: other\n")},
	}
	for name, want := range map[string]string{
		"typo":     `policy: json: unknown field "fatalCheck"`,
		"toplevel": `unknown field "valeus"`,
		"level":    "policy.podSecurityLevel",
		"timeout":  "soon",
		"named":    `declares name "other"`,
	} {
		_, err := profile.LoadFS(fsys, name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), want, name)
		assert.Contains(t, err.Error(), "profile "+name)
	}
	p, err := profile.LoadFS(fsys, "ok")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, p.Policy.TimeoutOrDefault())
	assert.True(t, p.Policy.IsIgnored("gpu-capacity"))
	assert.EqualValues(t, 3, p.Values["gateway"].(map[string]any)["replicas"])
}

func TestProfileFromPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(path, []byte("values: {logLevel: DEBUG}\npolicy: {minGatewayReplicas: 1}\n"), 0o600))
	p, err := profile.Load(path)
	require.NoError(t, err)
	assert.Equal(t, "edge", p.Name)
	assert.Equal(t, path, p.Source)
	assert.Equal(t, "DEBUG", p.Values["logLevel"])
	assert.Equal(t, profile.DefaultTimeout, p.Policy.TimeoutOrDefault())

	_, err = profile.Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such file")
	assert.Contains(t, err.Error(), "built-in profiles: development, production")
}
