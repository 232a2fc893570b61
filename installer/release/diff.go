package release

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// Diff summarises what an upgrade changes: objects by kind/name and container images.
type Diff struct {
	Added   []string      `json:"added,omitempty"`
	Removed []string      `json:"removed,omitempty"`
	Changed []string      `json:"changed,omitempty"`
	Images  []ImageChange `json:"images,omitempty"`
}

// ImageChange is one container whose image changes (Old or New empty when the container
// appears or goes).
type ImageChange struct {
	Object    string `json:"object"`
	Container string `json:"container"`
	Old       string `json:"old,omitempty"`
	New       string `json:"new,omitempty"`
}

// Empty reports a no-op upgrade.
func (d Diff) Empty() bool {
	return len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Images) == 0
}

// String renders the summary for the progress output.
func (d Diff) String() string {
	if d.Empty() {
		return "no changes to the release's objects\n"
	}
	var b strings.Builder
	for _, s := range []struct {
		sign  string
		items []string
	}{{"+", d.Added}, {"-", d.Removed}, {"~", d.Changed}} {
		for _, o := range s.items {
			fmt.Fprintf(&b, "  %s %s\n", s.sign, o)
		}
	}
	for _, i := range d.Images {
		fmt.Fprintf(&b, "  image %s container %s: %s -> %s\n", i.Object, i.Container, orNone(i.Old), orNone(i.New))
	}
	fmt.Fprintf(&b, "  %d added, %d removed, %d changed, %d image changes\n", len(d.Added), len(d.Removed), len(d.Changed), len(d.Images))
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// versionLabels change on every chart bump without changing behaviour; they would mark every
// object as changed.
var versionLabels = []string{"helm.sh/chart", "app.kubernetes.io/version"}

// DiffManifests compares the current release manifest with a new render.
func DiffManifests(current, next string) (Diff, error) {
	cur, err := parseManifest(current)
	if err != nil {
		return Diff{}, fmt.Errorf("current release manifest: %w", err)
	}
	nxt, err := parseManifest(next)
	if err != nil {
		return Diff{}, fmt.Errorf("new manifest: %w", err)
	}
	var d Diff
	for k, n := range nxt {
		c, ok := cur[k]
		if !ok {
			d.Added = append(d.Added, k)
			continue
		}
		if !reflect.DeepEqual(normalize(c), normalize(n)) {
			d.Changed = append(d.Changed, k)
		}
	}
	for k := range cur {
		if _, ok := nxt[k]; !ok {
			d.Removed = append(d.Removed, k)
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Strings(d.Changed)

	keys := map[string]bool{}
	for k := range cur {
		keys[k] = true
	}
	for k := range nxt {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		ci, ni := images(cur[k]), images(nxt[k])
		names := map[string]bool{}
		for n := range ci {
			names[n] = true
		}
		for n := range ni {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			if ci[n] != ni[n] {
				d.Images = append(d.Images, ImageChange{Object: k, Container: n, Old: ci[n], New: ni[n]})
			}
		}
	}
	return d, nil
}

func parseManifest(m string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for name, doc := range releaseutil.SplitManifests(m) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("document %s: %w", name, err)
		}
		if len(obj) == 0 {
			continue
		}
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		oname, _ := meta["name"].(string)
		if kind == "" || oname == "" {
			continue
		}
		out[kind+"/"+oname] = obj
	}
	return out, nil
}

func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if k == "labels" {
				if l, ok := val.(map[string]any); ok {
					l2 := make(map[string]any, len(l))
					for lk, lv := range l {
						l2[lk] = lv
					}
					for _, vl := range versionLabels {
						delete(l2, vl)
					}
					out[k] = l2
					continue
				}
			}
			out[k] = normalize(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = normalize(t[i])
		}
		return out
	}
	return v
}

// images maps container name to image for workloads (pod templates at the usual paths).
func images(obj map[string]any) map[string]string {
	out := map[string]string{}
	if obj == nil {
		return out
	}
	var spec map[string]any
	switch obj["kind"] {
	case "Pod":
		spec = dig(obj, "spec")
	case "CronJob":
		spec = dig(obj, "spec", "jobTemplate", "spec", "template", "spec")
	default:
		spec = dig(obj, "spec", "template", "spec")
	}
	for _, field := range []string{"initContainers", "containers"} {
		list, _ := spec[field].([]any)
		for _, c := range list {
			m, _ := c.(map[string]any)
			name, _ := m["name"].(string)
			image, _ := m["image"].(string)
			if name != "" {
				if field == "initContainers" {
					name = "init:" + name
				}
				out[name] = image
			}
		}
	}
	return out
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
