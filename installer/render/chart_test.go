package render_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// The embedded chart with every profile and every values seed renders, decodes strictly, and
// the migrations Job renders alone on request.
func TestEmbeddedChartProfilesAndSeeds(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	assert.Equal(t, "polyaxon", ch.Name())

	seeds, err := filepath.Glob("../../charts/testdata/seeds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, seeds)
	examples, err := filepath.Glob("../../values/*.yaml") // documented example files
	require.NoError(t, err)
	inputs := [][]string{nil}
	for _, s := range append(seeds, examples...) {
		if filepath.Base(s) != "distributed-tf.yaml" { // a run topology, not values
			inputs = append(inputs, []string{s})
		}
	}
	for _, name := range profile.Names() {
		p, err := profile.Load(name)
		require.NoError(t, err)
		for _, files := range inputs {
			if len(files) == 1 {
				if ok, err := values.ExampleFor(files[0], name); err != nil || !ok {
					require.NoError(t, err)
					continue // not for this profile, by its own "# profiles:" line
				}
			}
			t.Run(name+"/"+strings.Join(files, ","), func(t *testing.T) {
				vals, _, err := values.BuildFiles(p.Name, p.Values, values.Options{ValueFiles: files})
				require.NoError(t, err)
				res, err := render.Render(ch, vals, render.Options{})
				require.NoError(t, err)
				assert.NotEmpty(t, res.Manifests)
				for _, m := range res.Manifests {
					// CloudNativePG's Cluster is decoded by its operator's webhooks, not here (its
					// Go API would bring the operator's dependencies into the installer).
					if m.Kind() != "CustomResourceDefinition" && m.Object.GroupVersionKind().Group != "postgresql.cnpg.io" {
						assert.NotNil(t, m.Typed, "%s %s: every chart kind is a k8s.io/api kind", m.Kind(), m.Name())
					}
				}
				assert.NotEmpty(t, res.Notes)
			})
		}
	}
}

func TestEmbeddedChartMigrationsJob(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	ms, err := render.RenderTemplate(ch, map[string]any{"migrations": map[string]any{"renderJob": true}},
		render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"}, "templates/migrations/job.yaml")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	job, ok := ms[0].Typed.(*batchv1.Job)
	require.True(t, ok)
	assert.Equal(t, "polyaxon-migrate-"+strings.ReplaceAll(ch.Metadata.AppVersion, ".", "-"), job.Name)
	assert.False(t, ms[0].IsHook(), "renderJob yields a plain object the installer runs itself")
	assert.Equal(t, "migrate", job.Spec.Template.Spec.Containers[0].Name)

	// A first install migrates in a Job of the release (the gateway waits for it); an
	// upgrade's release has none: the installer runs the Job itself before upgrading.
	jobs := func(opts render.Options) []string {
		res, err := render.Render(ch, nil, opts)
		require.NoError(t, err)
		var names []string
		for _, m := range res.All() {
			if m.Kind() == "Job" {
				assert.False(t, m.IsHook(), "the install's migration Job is no hook")
				names = append(names, m.Name())
			}
		}
		return names
	}
	assert.Equal(t, []string{job.Name}, jobs(render.Options{}), "a first install migrates in a Job of the release")
	assert.Empty(t, jobs(render.Options{IsUpgrade: true}), "no migrations Job in an upgraded release")
}

func TestEmbeddedChartSchemaErrorPath(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"gateway": map[string]any{"replicas": "two"}}, render.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gateway.replicas")
}

func TestSchemaErrorPathUnescapesKeys(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"migrations": map[string]any{"podAnnotations": map[string]any{"polyaxon-deploy.test/fail": 1}}}, render.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "migrations.podAnnotations.polyaxon-deploy.test/fail")
	assert.NotContains(t, err.Error(), "~1")
}

// commonLabels may not set a label the chart's selectors and NetworkPolicies match on: the
// render is refused with the key's path, before anything else happens.
func TestSchemaRefusesReservedCommonLabels(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"commonLabels": map[string]any{"team": "ml", "app.kubernetes.io/part-of": "x"}}, render.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at commonLabels.app.kubernetes.io/part-of: reserved, the chart sets this key itself: remove it")
	var se *render.SchemaError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"commonLabels.app.kubernetes.io/part-of"}, se.Paths)
}
