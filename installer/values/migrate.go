package values

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
)

// Legacy input migrations, applied to each layer (profile, each -f file, the --set layer)
// before layering, so two layers written in different spellings never collide.
//
//	old (Polyaxon v0/v1 charts, production guide)     new                               action
//	nodeSelector.<category>                             nodeSelectors.<category>          renamed, warning
//	nodeSelector: {label: value} (v1, platform pods)    nodeSelectors.core                moved, warning
//	tolerations: [..] (v1, platform pods)               tolerations.core                  moved, warning
//	tolerations: {key: .., operator: ..} (one object)   -                                 rejected: which category?
//	tolerations.<category>: {key: ..} (one object)      tolerations.<category>: [{..}]    wrapped, warning
//	<component>.tolerations: {key: ..} (one object)     <component>.tolerations: [{..}]   wrapped, warning
//	affinity: {nodeAffinity: ..} (v1, platform pods)    affinity.core                     moved, warning
//	rbac.enabled                                        rbac.create                       renamed, warning
//	postgresql.postgresUser / postgresqlUsername        postgresql.auth.username          renamed, warning
//	postgresql.postgresPassword / postgresqlPassword    postgresql.auth.password          renamed, warning
//	postgresql.postgresDatabase / postgresqlDatabase    postgresql.auth.database          renamed, warning
//	postgresql.existingSecret                           postgresql.auth.existingSecret    renamed, warning
//	postgresql.primary.persistence (bitnami >= 11)      postgresql.persistence            renamed, warning
//
// The chart itself also accepts `nodeSelector:` keyed by category; the installer renames it
// anyway because a profile written with `nodeSelectors:` plus a user file written with
// `nodeSelector:` would otherwise set both, which the chart rejects.

// Categories are the scheduling categories of the chart (declared in the chart itself).
var Categories = contract.SchedulingCategories()

var tolerationFields = map[string]bool{"key": true, "operator": true, "value": true, "effect": true, "tolerationSeconds": true}

var affinityFields = map[string]bool{"nodeAffinity": true, "podAffinity": true, "podAntiAffinity": true}

// renames are the plain path renames of the table above.
var renames = []struct{ from, to string }{
	{"rbac.enabled", "rbac.create"},
	{"postgresql.postgresUser", "postgresql.auth.username"},
	{"postgresql.postgresqlUsername", "postgresql.auth.username"},
	{"postgresql.postgresPassword", "postgresql.auth.password"},
	{"postgresql.postgresqlPassword", "postgresql.auth.password"},
	{"postgresql.postgresDatabase", "postgresql.auth.database"},
	{"postgresql.postgresqlDatabase", "postgresql.auth.database"},
	{"postgresql.existingSecret", "postgresql.auth.existingSecret"},
	{"postgresql.primary.persistence", "postgresql.persistence"},
}

// Warning is one migrated input.
type Warning struct {
	Source  string `json:"source"`  // file path, "--set" or "profile NAME"
	Path    string `json:"path"`    // the old path
	NewPath string `json:"newPath"` // where it went
	Message string `json:"message"`
	// Spelling is the new spelling as YAML, ready to paste into a values file.
	Spelling string `json:"spelling,omitempty"`
}

func (w Warning) String() string {
	s := fmt.Sprintf("%s: %s", w.Source, w.Message)
	if w.Spelling != "" {
		s += "; write it as:\n" + indent(w.Spelling, "    ")
	}
	return s
}

// MigrationError is a legacy input that cannot be migrated safely.
type MigrationError struct {
	Source string
	Path   string
	Reason string
	Fix    string
}

func (e *MigrationError) Error() string {
	return fmt.Sprintf("%s: %s: %s (fix: %s)", e.Source, e.Path, e.Reason, e.Fix)
}

// Migrate rewrites one layer in place and returns it with the warnings. source names the
// layer in messages.
func Migrate(source string, layer map[string]any) (map[string]any, []Warning, error) {
	m := &migrator{source: source, layer: layer}
	steps := []func() error{m.nodeSelector, m.tolerations, m.affinity, m.componentTolerations, m.renames}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, nil, err
		}
	}
	return layer, m.warnings, nil
}

type migrator struct {
	source   string
	layer    map[string]any
	warnings []Warning
}

func (m *migrator) warn(oldPath, newPath, msg string, newValue any) {
	w := Warning{Source: m.source, Path: oldPath, NewPath: newPath, Message: msg}
	if newValue != nil {
		w.Spelling = spelling(newPath, newValue)
	}
	m.warnings = append(m.warnings, w)
}

func (m *migrator) fail(path, reason, fix string) error {
	return &MigrationError{Source: m.source, Path: path, Reason: reason, Fix: fix}
}

// nodeSelector (singular) -> nodeSelectors.
func (m *migrator) nodeSelector() error {
	raw, ok := m.layer["nodeSelector"]
	if !ok {
		return nil
	}
	if raw == nil {
		delete(m.layer, "nodeSelector")
		return nil
	}
	sel, ok := raw.(map[string]any)
	if !ok {
		return m.fail("nodeSelector", fmt.Sprintf("expected a map of categories, got %T", raw),
			"write nodeSelectors: {core: {label: value}, experiments: {...}}")
	}
	if len(sel) == 0 {
		delete(m.layer, "nodeSelector")
		return nil
	}
	byCategory, flat, other := 0, 0, []string{}
	for k, v := range sel {
		switch v.(type) {
		case map[string]any, nil:
			if isCategory(k) {
				byCategory++
				continue
			}
		case string:
			flat++
			continue
		}
		other = append(other, k)
	}
	sort.Strings(other)
	plural := m.subMap("nodeSelectors")
	switch {
	case byCategory == len(sel):
		for _, cat := range slices.Sorted(maps.Keys(sel)) {
			if existing, ok := plural[cat].(map[string]any); ok && len(existing) > 0 {
				return m.fail("nodeSelector."+cat, "both nodeSelector."+cat+" and nodeSelectors."+cat+" are set in the same file",
					"keep only nodeSelectors."+cat)
			}
			plural[cat] = sel[cat]
		}
		delete(m.layer, "nodeSelector")
		m.layer["nodeSelectors"] = plural
		m.warn("nodeSelector", "nodeSelectors", "nodeSelector (singular, keyed by category) is the older spelling of nodeSelectors; using nodeSelectors", sel)
		return nil
	case flat == len(sel):
		if existing, ok := plural["core"].(map[string]any); ok && len(existing) > 0 {
			return m.fail("nodeSelector", "a flat nodeSelector (Polyaxon v1: the platform's pods) and nodeSelectors.core are both set",
				"keep only nodeSelectors.core")
		}
		plural["core"] = sel
		delete(m.layer, "nodeSelector")
		m.layer["nodeSelectors"] = plural
		m.warn("nodeSelector", "nodeSelectors.core", "a flat nodeSelector (Polyaxon v1 shape) applied to the platform's own pods; moved to nodeSelectors.core", sel)
		return nil
	default:
		return m.fail("nodeSelector", fmt.Sprintf("mixes category keys and node labels (unexpected keys: %s)", strings.Join(other, ", ")),
			"write nodeSelectors.<category>: {label: value} with category one of "+strings.Join(Categories, ", "))
	}
}

// tolerations: a list (v1) -> tolerations.core; per-category single objects -> lists.
func (m *migrator) tolerations() error {
	raw, ok := m.layer["tolerations"]
	if !ok || raw == nil {
		return nil
	}
	switch t := raw.(type) {
	case []any:
		m.layer["tolerations"] = map[string]any{"core": t}
		m.warn("tolerations", "tolerations.core", "a tolerations list (Polyaxon v1 shape) applied to the platform's own pods; moved to tolerations.core", t)
		return nil
	case map[string]any:
		if looksLikeToleration(t) {
			return m.fail("tolerations", "a single toleration object without a category is ambiguous",
				"put it in a list under a category, e.g.\n"+indent(spelling("tolerations.core", []any{t}), "    ")+
					"\n  (categories: "+strings.Join(Categories, ", ")+")")
		}
		for _, cat := range slices.Sorted(maps.Keys(t)) {
			if !isCategory(cat) {
				continue // the chart schema reports unknown keys with their path
			}
			if err := m.wrapSingle(t, cat, "tolerations."+cat); err != nil {
				return err
			}
		}
		return nil
	default:
		return m.fail("tolerations", fmt.Sprintf("expected a map of categories to lists, got %T", raw),
			"write tolerations: {core: [{key: ..., operator: Exists, effect: NoSchedule}]}")
	}
}

// affinity: a v1 pod affinity at the top level -> affinity.core.
func (m *migrator) affinity() error {
	a, ok := m.layer["affinity"].(map[string]any)
	if !ok || len(a) == 0 {
		return nil
	}
	n := 0
	for k := range a {
		if affinityFields[k] {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if n != len(a) {
		return m.fail("affinity", "mixes categories and affinity fields (nodeAffinity, podAffinity, podAntiAffinity)",
			"write affinity.<category>: {nodeAffinity: ...}")
	}
	m.layer["affinity"] = map[string]any{"core": a}
	m.warn("affinity", "affinity.core", "a top-level affinity (Polyaxon v1 shape) applied to the platform's own pods; moved to affinity.core", a)
	return nil
}

// <component>.tolerations given as one object -> a list of one.
func (m *migrator) componentTolerations() error {
	for _, comp := range slices.Sorted(maps.Keys(m.layer)) {
		if comp == "tolerations" {
			continue
		}
		c, ok := m.layer[comp].(map[string]any)
		if !ok {
			continue
		}
		if _, ok := c["tolerations"]; !ok {
			continue
		}
		if err := m.wrapSingle(c, "tolerations", comp+".tolerations"); err != nil {
			return err
		}
	}
	return nil
}

// wrapSingle turns parent[key] from one toleration object into a list of one.
func (m *migrator) wrapSingle(parent map[string]any, key, path string) error {
	obj, ok := parent[key].(map[string]any)
	if !ok {
		return nil
	}
	if len(obj) == 0 {
		parent[key] = []any{}
		return nil
	}
	if !looksLikeToleration(obj) {
		return m.fail(path, "tolerations must be a list of {key, operator, value, effect, tolerationSeconds}",
			"write "+path+" as a list, e.g.\n"+indent(spelling(path, []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}), "    "))
	}
	parent[key] = []any{obj}
	m.warn(path, path, path+" is a single toleration (older shape); using a list of one", []any{obj})
	return nil
}

func (m *migrator) renames() error {
	for _, r := range renames {
		v, ok := Lookup(m.layer, r.from)
		if !ok {
			continue
		}
		if existing, ok := Lookup(m.layer, r.to); ok && existing != nil {
			return m.fail(r.from, "both "+r.from+" and "+r.to+" are set", "keep only "+r.to)
		}
		deletePath(m.layer, r.from)
		setPath(m.layer, r.to, v)
		m.warn(r.from, r.to, r.from+" is an older key; using "+r.to, v)
	}
	return nil
}

// subMap returns layer[key] as a map, creating it.
func (m *migrator) subMap(key string) map[string]any {
	if mm, ok := m.layer[key].(map[string]any); ok {
		return mm
	}
	return map[string]any{}
}

func looksLikeToleration(m map[string]any) bool {
	if len(m) == 0 {
		return false
	}
	for k := range m {
		if !tolerationFields[k] {
			return false
		}
	}
	return true
}

func isCategory(s string) bool {
	for _, c := range Categories {
		if c == s {
			return true
		}
	}
	return false
}

func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	cur := m
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = v
}

// deletePath removes the key and any maps it leaves empty.
func deletePath(m map[string]any, path string) {
	parts := strings.Split(path, ".")
	if len(parts) == 1 {
		delete(m, parts[0])
		return
	}
	child, ok := m[parts[0]].(map[string]any)
	if !ok {
		return
	}
	deletePath(child, strings.Join(parts[1:], "."))
	if len(child) == 0 {
		delete(m, parts[0])
	}
}

// spelling renders value at a dotted path as nested YAML, secrets masked: warnings end up on
// stderr, in results and in the debug log.
func spelling(path string, value any) string {
	nested := map[string]any{}
	setPath(nested, path, value)
	out, err := yaml.Marshal(redact.Values(nested))
	if err != nil {
		return path + ": " + redact.Mask
	}
	return strings.TrimRight(string(out), "\n")
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
