// Package chartdoc builds the values table of a chart README from the `## @param <path>
// <description>` comments of its values.yaml (the bitnami convention), with each value's
// default read from the YAML itself, so the README cannot drift from the chart.
package chartdoc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Markers around the generated part of the README.
const (
	StartMarker = "<!-- values-table:start -->"
	EndMarker   = "<!-- values-table:end -->"
)

// Param is one documented value.
type Param struct {
	Path        string
	Description string
	Default     any
	Line        int
}

// Section groups params under a `## @section <name>` heading; Description holds the plain
// `## ` comment lines that follow the heading.
type Section struct {
	Name        string
	Description string
	Params      []Param
}

// Doc is a parsed values.yaml.
type Doc struct {
	Sections []Section
	values   map[string]any
}

var (
	paramRe   = regexp.MustCompile(`^\s*##\s*@param\s+(\S+)\s+(.+?)\s*$`)
	sectionRe = regexp.MustCompile(`^\s*##\s*@section\s+(.+?)\s*$`)
	commentRe = regexp.MustCompile(`^\s*##(?:\s(.*))?$`)
)

// Parse reads the @section and @param lines of a values file and resolves each param's
// default. A param whose path is not in the YAML, or a path documented twice, is an error.
func Parse(valuesYAML []byte) (*Doc, error) {
	vals := map[string]any{}
	if err := yaml.Unmarshal(valuesYAML, &vals); err != nil {
		return nil, fmt.Errorf("parse values: %w", err)
	}
	doc := &Doc{values: vals}
	seen := map[string]int{}
	var errs []string
	cur := -1
	inSectionText := false

	sc := bufio.NewScanner(bytes.NewReader(valuesYAML))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := sectionRe.FindStringSubmatch(line); m != nil {
			doc.Sections = append(doc.Sections, Section{Name: m[1]})
			cur = len(doc.Sections) - 1
			inSectionText = true
			continue
		}
		if m := paramRe.FindStringSubmatch(line); m != nil {
			inSectionText = false
			path := m[1]
			if prev, dup := seen[path]; dup {
				errs = append(errs, fmt.Sprintf("line %d: @param %s already documented on line %d", n, path, prev))
				continue
			}
			seen[path] = n
			def, ok := values.Lookup(vals, path)
			if !ok {
				errs = append(errs, fmt.Sprintf("line %d: @param %s: no such value in values.yaml", n, path))
				continue
			}
			if cur < 0 { // params before any section
				doc.Sections = append(doc.Sections, Section{Name: "Parameters"})
				cur = 0
			}
			doc.Sections[cur].Params = append(doc.Sections[cur].Params, Param{Path: path, Description: m[2], Default: def, Line: n})
			continue
		}
		if m := commentRe.FindStringSubmatch(line); m != nil && inSectionText && cur >= 0 {
			s := &doc.Sections[cur]
			s.Description = strings.TrimSpace(s.Description + " " + strings.TrimSpace(m[1]))
			continue
		}
		inSectionText = false
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("values.yaml @param lines:\n  %s", strings.Join(errs, "\n  "))
	}
	return doc, nil
}

// Params returns every param in file order.
func (d *Doc) Params() []Param {
	var out []Param
	for _, s := range d.Sections {
		out = append(out, s.Params...)
	}
	return out
}

// Undocumented lists the values with no @param. A leaf (scalar, list, null or empty map)
// needs its own; a map with content is covered when it is documented itself (its keys are
// then its default, e.g. `resources`), else each of its children must be.
func (d *Doc) Undocumented() []string {
	documented := map[string]bool{}
	for _, p := range d.Params() {
		documented[p.Path] = true
	}
	var missing []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			if documented[path] {
				continue
			}
			if child, ok := v.(map[string]any); ok && len(child) > 0 {
				walk(path, child)
				continue
			}
			missing = append(missing, path)
		}
	}
	walk("", d.values)
	sort.Strings(missing)
	return missing
}

// Markdown renders one table per section.
func (d *Doc) Markdown() string {
	var b strings.Builder
	for i, s := range d.Sections {
		if len(s.Params) == 0 {
			continue
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", s.Name)
		if s.Description != "" {
			fmt.Fprintf(&b, "%s\n\n", s.Description)
		}
		b.WriteString("| Name | Description | Default |\n|------|-------------|---------|\n")
		for _, p := range s.Params {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p.Path, cell(p.Description), cell(FormatDefault(p.Default)))
		}
	}
	return b.String()
}

// FormatDefault shows a default as a user would write it: strings bare unless YAML would read
// them as something else (`""`, `"16"`, `"true"`), maps and lists as compact JSON.
func FormatDefault(v any) string {
	switch x := v.(type) {
	case nil:
		return "`null`"
	case string:
		if readsAsString(x) {
			return "`" + x + "`"
		}
		return "`" + compactJSON(x) + "`"
	default:
		return "`" + compactJSON(x) + "`"
	}
}

// readsAsString reports whether s, written bare in YAML, reads back as the same string.
func readsAsString(s string) bool {
	if s == "" || strings.ContainsAny(s, "`\n") {
		return false
	}
	var back any
	if err := yaml.Unmarshal([]byte(s), &back); err != nil {
		return false
	}
	got, ok := back.(string)
	return ok && got == s
}

// compactJSON encodes v on one line with keys sorted and no HTML escaping.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cell keeps a table cell on one line and its pipes literal.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// Splice replaces the text between the markers of readme with table.
func Splice(readme, table string) (string, error) {
	start := strings.Index(readme, StartMarker)
	end := strings.Index(readme, EndMarker)
	if start < 0 || end < 0 || end < start {
		return "", fmt.Errorf("README: markers %s / %s not found in order", StartMarker, EndMarker)
	}
	head := readme[:start+len(StartMarker)]
	return head + "\n" + table + readme[end:], nil
}
