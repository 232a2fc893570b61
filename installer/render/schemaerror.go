package render

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// jsonschema errors point at values with JSON pointers ('/gateway/replicas'); users write
// dotted paths, so rewrite them.
var pointerRE = regexp.MustCompile(`at '(/[^']*)'`)

// SchemaError is a values.schema.json violation; Paths are the offending dotted value paths.
type SchemaError struct {
	Paths []string
	Msg   string
}

func (e *SchemaError) Error() string { return e.Msg }

func schemaError(err error, schema []byte) error {
	msg := err.Error()
	if !strings.Contains(msg, "schema") {
		return err
	}
	var paths []string
	msg = pointerRE.ReplaceAllStringFunc(msg, func(s string) string {
		p := pointerRE.FindStringSubmatch(s)[1]
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i, seg := range segs {
			// JSON-pointer escapes (RFC 6901): a key such as "polyaxon-deploy.test/fail" arrives as ~1.
			segs[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		}
		dotted := strings.Join(segs, ".")
		if dotted == "" {
			dotted = "(top level)"
		}
		paths = append(paths, dotted)
		return "at " + dotted
	})
	msg = unknownKeyRE.ReplaceAllStringFunc(msg, func(s string) string {
		m := unknownKeyRE.FindStringSubmatch(s)
		if known := schemaKeys(schema, m[1]); len(known) > 0 {
			return s + " (known: " + strings.Join(known, ", ") + ")"
		}
		return s
	})
	// The schema forbids a key with `false`: one the chart sets itself (commonLabels' reserved labels).
	msg = strings.ReplaceAll(msg, ": false schema", ": reserved, the chart sets this key itself: remove it")
	msg = strings.Replace(msg, "values don't meet the specifications of the schema(s) in the following chart(s):", "invalid values (values.schema.json):", 1)
	return &SchemaError{Paths: paths, Msg: strings.TrimSpace(msg)}
}

// A typo in a strict map: name what is allowed there, e.g. the run categories under nodeSelectors.
var unknownKeyRE = regexp.MustCompile(`at ([^:\s]+): additional properties '[^\n]*' not allowed`)

// schemaKeys lists the property names the schema allows at a dotted values path, following
// local $refs; nil when it cannot tell.
func schemaKeys(schema []byte, dotted string) []string {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	resolve := func(n map[string]any) map[string]any {
		for i := 0; i < 8; i++ {
			ref, ok := n["$ref"].(string)
			if !ok || !strings.HasPrefix(ref, "#/") {
				return n
			}
			next := any(root)
			for _, seg := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				m, _ := next.(map[string]any)
				next = m[seg]
			}
			if n, ok = next.(map[string]any); !ok {
				return nil
			}
		}
		return n
	}
	node := resolve(root)
	if dotted != "(top level)" {
		for _, seg := range strings.Split(dotted, ".") {
			props, _ := node["properties"].(map[string]any)
			child, ok := props[seg].(map[string]any)
			if !ok {
				return nil
			}
			if node = resolve(child); node == nil {
				return nil
			}
		}
	}
	props, _ := node["properties"].(map[string]any)
	keys := slices.Sorted(maps.Keys(props))
	return keys
}
