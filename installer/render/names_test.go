package render_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// The names the installer selects with are those of the rendered objects, with and without
// nameOverride/fullnameOverride: every object of the render carries the selector, and the
// component names are the rendered objects' names.
func TestNamesAreTheRenderedOnes(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	for _, tc := range []struct {
		release  string
		vals     map[string]any
		name     string
		fullname string
	}{
		{"polyaxon", nil, "polyaxon", "polyaxon"},
		{"ml", nil, "polyaxon", "ml-polyaxon"},
		{"ml", map[string]any{"nameOverride": "platform"}, "platform", "ml-platform"},
		{"ml", map[string]any{"nameOverride": "platform", "fullnameOverride": "core"}, "platform", "core"},
	} {
		t.Run(tc.release+"/"+tc.fullname, func(t *testing.T) {
			n, err := render.NamesOf(ch, tc.vals, tc.release)
			require.NoError(t, err)
			assert.Equal(t, tc.name, n.Name)
			assert.Equal(t, tc.fullname, n.Fullname)
			assert.Equal(t, map[string]string{"app.kubernetes.io/name": tc.name, "app.kubernetes.io/instance": tc.release}, n.Selector)

			res, err := render.Render(ch, tc.vals, render.Options{ReleaseName: tc.release})
			require.NoError(t, err)
			for _, m := range res.Manifests {
				if m.Kind() == "CustomResourceDefinition" || m.Kind() == "Namespace" {
					continue
				}
				assert.Truef(t, n.Owns(m.Object.GetLabels()), "%s %s carries %s", m.Kind(), m.Name(), n.SelectorString())
			}
			for _, kind := range []string{"StatefulSet", "Service", "Secret"} {
				_, ok := res.Find(kind, n.Component("postgresql"))
				assert.Truef(t, ok, "%s %s rendered", kind, n.Component("postgresql"))
			}
			_, ok := res.Find("Deployment", n.Component("gateway"))
			assert.True(t, ok, "Deployment %s rendered", n.Component("gateway"))
			_, ok = res.Find("Secret", n.PlatformSecret)
			assert.True(t, ok, "Secret %s rendered", n.PlatformSecret)
		})
	}
}

// Names without a selector own nothing: an empty selector would match every object.
func TestNamesWithoutASelectorOwnNothing(t *testing.T) {
	assert.False(t, render.Names{}.Owns(map[string]string{"app.kubernetes.io/name": "polyaxon"}))
	assert.False(t, render.Names{}.Owns(nil))
	n := render.Names{Selector: map[string]string{"app.kubernetes.io/instance": "ml"}}
	assert.True(t, n.Owns(map[string]string{"app.kubernetes.io/instance": "ml", "x": "y"}))
	assert.False(t, n.Owns(map[string]string{"app.kubernetes.io/instance": "other"}))
}
