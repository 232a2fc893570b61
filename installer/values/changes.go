package values

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
)

// Change is one value that a release has and a new render changes or drops.
type Change struct {
	Path string `json:"path"`
	Old  any    `json:"old"`
	New  any    `json:"new,omitempty"`
	// Dropped: the new values do not have the path at all.
	Dropped bool `json:"dropped,omitempty"`
}

// String is the change for messages; a secret's values are not shown.
func (c Change) String() string {
	old, new := show(c.Old), show(c.New)
	if redact.IsSecretPath(c.Path) {
		old, new = "(secret)", "(changed)"
	}
	if c.Dropped {
		return fmt.Sprintf("%s: %s -> dropped", c.Path, old)
	}
	return fmt.Sprintf("%s: %s -> %s", c.Path, old, new)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Changes lists, sorted by path, each value of old that new changes or drops. Maps are walked
// key by key; lists and scalars are compared whole, numbers by value (a value read from Helm's
// storage is a float, one from --set an integer). Values only new has are not listed.
func Changes(old, new map[string]any) []Change {
	var out []Change
	walkChanges("", normalize(old), normalize(new), &out)
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func walkChanges(prefix string, old, new map[string]any, out *[]Change) {
	for k, ov := range old {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		nv, ok := new[k]
		om, oIsMap := ov.(map[string]any)
		nm, nIsMap := nv.(map[string]any)
		switch {
		case oIsMap && nIsMap:
			walkChanges(path, om, nm, out)
		case oIsMap && len(om) == 0 && !ok:
			// An empty map dropped changes nothing.
		case !ok:
			*out = append(*out, Change{Path: path, Old: ov, Dropped: true})
		case !reflect.DeepEqual(ov, nv):
			*out = append(*out, Change{Path: path, Old: ov, New: nv})
		}
	}
}

// normalize gives both sides JSON's types (float64 numbers, []any lists).
func normalize(m map[string]any) map[string]any {
	out := map[string]any{}
	if b, err := json.Marshal(m); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

// FormatChanges is one change per line (progress output indents them under its message).
func FormatChanges(cs []Change) string {
	lines := make([]string, len(cs))
	for i, c := range cs {
		lines[i] = c.String()
	}
	return strings.Join(lines, "\n")
}
