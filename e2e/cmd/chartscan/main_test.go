package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

var valuesDir = filepath.Join("..", "..", "..", "values")

func TestPlanRendersEveryProfileWithEveryValuesFile(t *testing.T) {
	specs, err := plan(valuesDir)
	require.NoError(t, err)
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	for _, want := range []string{"production", "development", "production+air-gapped", "development+ssl-ingress"} {
		assert.Contains(t, names, want)
	}
	for _, n := range names {
		assert.NotContains(t, n, "distributed", "values/topologies/ holds run topologies, not chart values")
	}
	files, err := filepath.Glob(filepath.Join(valuesDir, "*.yaml"))
	require.NoError(t, err)
	profiles := profile.Names()
	// Two files name the one profile they are for ("# profiles:"): each is left out once.
	assert.Len(t, specs, len(profiles)*(1+len(files)-len(profiles))-2, "each profile alone and with each values file but the profiles' own")
	assert.NotContains(t, names, "development+cloudnativepg", "values/cloudnativepg.yaml: production only")
	assert.NotContains(t, names, "production+artifacts-host-path", "values/artifacts-host-path.yaml: development only")
	assert.NotContains(t, names, "development+production", "values/production.yaml is the production profile's values, rendered as production alone")
}

// Every object lands in its own file, named after its Kind and name, in a form trivy
// recognises as a Kubernetes manifest (a file starting with "---" is silently skipped by trivy).
func TestWriteGivesEachObjectItsOwnFile(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	dir := t.TempDir()
	objects, err := renderSpec{name: "production", profile: "production"}.write(ch, dir)
	require.NoError(t, err)
	assert.Contains(t, objects, "Deployment/polyaxon-gateway")
	assert.Contains(t, objects, "Role/polyaxon-agent")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(objects))
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.False(t, strings.HasPrefix(string(data), "---"), e.Name())
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		require.NoError(t, yaml.Unmarshal(data, &obj), e.Name())
		if obj.Kind == "PersistentVolumeClaim" && obj.Metadata.Namespace == "polyaxon-runs" {
			// The runs' artifacts claim has the gateway's claim's name: its file names its namespace.
			assert.Equal(t, "PersistentVolumeClaim.polyaxon-runs.polyaxon-artifacts.yaml", e.Name())
			continue
		}
		assert.Equal(t, obj.Kind+"."+obj.Metadata.Name+".yaml", e.Name())
	}
	assert.Contains(t, objects, "PersistentVolumeClaim/polyaxon-artifacts")
	assert.Contains(t, objects, "PersistentVolumeClaim/polyaxon-runs.polyaxon-artifacts")

	// A second render into the same directory would mix two renders' objects: refused.
	_, err = renderSpec{name: "production", profile: "production"}.write(ch, dir)
	require.Error(t, err)
}
