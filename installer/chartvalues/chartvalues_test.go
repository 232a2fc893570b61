package chartvalues

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
)

// schemaNode is the part of a JSON schema node the test reads.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
}

type schemaDoc struct {
	schemaNode
	Definitions map[string]*schemaNode `json:"definitions"`
}

func (d *schemaDoc) resolve(n *schemaNode) *schemaNode {
	for n != nil && n.Ref != "" {
		n = d.Definitions[strings.TrimPrefix(n.Ref, "#/definitions/")]
	}
	return n
}

// types are the JSON types a schema node allows.
func types(n *schemaNode) []string {
	switch t := n.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, s := range t {
			out = append(out, s.(string))
		}
		return out
	}
	return nil
}

// jsonTypeOf is the JSON type a Go field decodes.
func jsonTypeOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.String:
		return "string"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice:
		return "array"
	}
	return t.Kind().String()
}

// Every field of the typed view is a value of the chart's schema, of the type the schema
// gives it: a renamed or retyped value fails here, not in a cluster.
func TestEveryFieldIsInTheSchema(t *testing.T) {
	raw, err := charts.ReadFile("values.schema.json")
	require.NoError(t, err)
	var doc schemaDoc
	require.NoError(t, json.Unmarshal(raw, &doc))
	var walk func(path string, typ reflect.Type, node *schemaNode)
	walk = func(path string, typ reflect.Type, node *schemaNode) {
		node = doc.resolve(node)
		if !assert.NotNil(t, node, "%s is not in values.schema.json", path) {
			return
		}
		want := jsonTypeOf(typ)
		if got := types(node); len(got) > 1 {
			// A value of several types (a tag as a string or a number) is read by a type
			// that takes each of them.
			assert.Equal(t, reflect.TypeOf(Scalar("")), typ, "%s: the schema allows %v: read it as a Scalar", path, got)
		} else if len(got) > 0 {
			ok := false
			for _, g := range got {
				ok = ok || g == want || (g == "number" && want == "integer")
			}
			// DBOptions reads the older string form too; the schema gives the map.
			assert.True(t, ok, "%s: the schema says %v, the typed view reads %s", path, got, want)
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				walk(path, f.Type, node) // an embedded struct's fields are the node's own
				continue
			}
			child := node.Properties[name]
			if child == nil {
				if ap, ok := node.AdditionalProperties.(map[string]any); ok && len(ap) > 0 {
					continue
				}
			}
			walk(strings.TrimPrefix(path+"."+name, "."), f.Type, child)
		}
	}
	walk("", reflect.TypeOf(Values{}), &doc.schemaNode)
}

// The defaults are the chart's: what values.yaml says, with nothing typed again in Go.
func TestDefaultsAreTheChartsOwn(t *testing.T) {
	v, err := Defaults()
	require.NoError(t, err)
	assert.True(t, v.Postgresql.Enabled)
	assert.Equal(t, Scalar("16.4"), v.Postgresql.Image.Tag)
	assert.Equal(t, "polyaxon", v.Postgresql.Auth.Database)
	assert.Equal(t, 5432, v.ExternalServices.Postgresql.Port)
	assert.Equal(t, "postgres-password", v.ExternalServices.Postgresql.PasswordKey)
	assert.Equal(t, 8000, v.Gateway.Service.TargetPort)
	assert.Contains(t, v.Operators, "tfjob")
	assert.Contains(t, v.NodeSelectors, "core")
}

// A release's values are read over the defaults: what it sets wins, what an older chart did
// not have reads as this chart's default; the older string form of the database options reads
// as the map.
func TestOfReadsValuesOverTheDefaults(t *testing.T) {
	v, err := Of(map[string]any{
		"postgresql":       map[string]any{"enabled": false, "image": map[string]any{"tag": 15}}, // --set gives a number
		"externalServices": map[string]any{"postgresql": map[string]any{"host": "db.internal", "port": 6432, "options": "sslmode=require connect_timeout=5"}},
		"operators":        map[string]any{"tfjob": true},
	})
	require.NoError(t, err)
	assert.False(t, v.Postgresql.Enabled)
	assert.Equal(t, Scalar("15"), v.Postgresql.Image.Tag)
	assert.Equal(t, "polyaxon", v.Postgresql.Auth.Username, "not in the given values: the chart's default")
	assert.Equal(t, "db.internal", v.ExternalServices.Postgresql.Host)
	assert.Equal(t, 6432, v.ExternalServices.Postgresql.Port)
	assert.Equal(t, DBOptions{"sslmode": "require", "connect_timeout": "5"}, v.ExternalServices.Postgresql.Options)
	assert.True(t, v.Operators["tfjob"])
	assert.False(t, v.Operators["pytorchjob"], "the chart's default, kept beside the given one")

	v, err = Of(map[string]any{"externalServices": map[string]any{"postgresql": map[string]any{"options": map[string]any{"sslmode": "verify-full"}}}})
	require.NoError(t, err)
	assert.Equal(t, "verify-full", v.ExternalServices.Postgresql.Options["sslmode"])

	_, err = Of(map[string]any{"gateway": map[string]any{"replicas": "three"}})
	assert.ErrorContains(t, err, "gateway.replicas")
}
