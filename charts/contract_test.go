package charts_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// The chart's contract is declared once (files/components.yaml, files/run-categories.yaml);
// every consumer follows it. Adding a run category is a change to run-categories.yaml: the
// schema's category maps are generated from it (`go test ./charts/ -run TestSchemaCategories
// -update`), and these tests fail while any consumer disagrees.

var categoryMaps = map[string]string{
	"nodeSelectors": "#/definitions/io.k8s.api.core.v1.NodeSelector",
	"nodeSelector":  "#/definitions/io.k8s.api.core.v1.NodeSelector",
	"tolerations":   "#/definitions/tolerations",
	"affinity":      "#/definitions/io.k8s.api.core.v1.Affinity",
}

func TestSchemaCategoriesFollowTheDeclaration(t *testing.T) {
	path := filepath.Join("polyaxon", "values.schema.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(raw, &schema))
	props := schema["properties"].(map[string]any)
	want := contract.SchedulingCategories()
	changed := false
	for key, ref := range categoryMaps {
		node := props[key].(map[string]any)
		got := node["properties"].(map[string]any)
		if sameKeys(got, want) {
			continue
		}
		if !*update {
			t.Errorf("values.schema.json %s lists categories %v, the chart declares %v: run go test ./charts/ -run TestSchemaCategories -update", key, slices.Sorted(maps.Keys(got)), want)
			continue
		}
		gen := map[string]any{}
		for _, c := range want {
			gen[c] = map[string]any{"$ref": ref}
		}
		node["properties"] = gen
		changed = true
	}
	if changed {
		out, err := json.MarshalIndent(schema, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
	}
	assert.Equal(t, want, values.Categories, "the migration of old spellings knows the categories")
}

// Every pod the chart renders says whether it is core exactly as the declaration does: the
// plan places pods by that label, and the NetworkPolicies let exactly those reach the dependencies.
func TestComponentsFollowTheDeclaration(t *testing.T) {
	r := render(t, everything)
	for _, p := range r.pods(t) {
		_, labelled := p.meta.Labels[contract.RoleLabel]
		assert.Equal(t, components.IsCore(p.component), labelled, "%s %s (component %s): %s", p.kind, p.name, p.component, contract.RoleLabel)
		assert.True(t, components.IsCore(p.component) || components.IsDependency(p.component), "component %s is not declared", p.component)
	}
	np := r.get("NetworkPolicy", "polyaxon-postgresql")
	require.NotNil(t, np)
	peers, _, _ := nestedSlice(np.Object, "spec", "ingress")
	from := peers[0].(map[string]any)["from"].([]any)[0].(map[string]any)["podSelector"].(map[string]any)
	exprs := from["matchExpressions"].([]any)[0].(map[string]any)["values"].([]any)
	var got []string
	for _, v := range exprs {
		got = append(got, v.(string))
	}
	assert.Equal(t, components.Core, got, "the dependencies admit exactly the core components")
}

func sameKeys(m map[string]any, want []string) bool {
	got := slices.Sorted(maps.Keys(m))
	w := append([]string(nil), want...)
	sort.Strings(w)
	return assert.ObjectsAreEqual(got, w)
}

func nestedSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
