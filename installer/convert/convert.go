// Package convert turns a values file written for the official polyaxon/polyaxon Helm chart
// (2.x, with its Bitnami PostgreSQL, RabbitMQ and Redis) into values for ours. Every key of the
// input is accounted for: mapped (with its new spelling), ignored (no effect in ours, said
// why), or unmapped (ours cannot do what it asks, said why). The table of rules is in
// table.go; README.md shows it side by side.
package convert

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Entry is what happened to one key of the input.
type Entry struct {
	// Key is the official path (dotted).
	Key    string `json:"key"`
	Action Action `json:"action"`
	// To are our paths the value went to (Mapped).
	To []string `json:"to,omitempty"`
	// Reason says why the key is ignored or unmapped, or how it was reshaped.
	Reason string `json:"reason,omitempty"`
}

func (e Entry) String() string {
	switch e.Action {
	case Mapped:
		s := e.Key + " -> " + strings.Join(e.To, ", ")
		if e.Reason != "" {
			s += " (" + e.Reason + ")"
		}
		return s
	case Ignored:
		return e.Key + ": ignored: " + e.Reason
	}
	return e.Key + ": NOT MAPPED: " + e.Reason
}

// Result is a converted values document and the account of every key.
type Result struct {
	Values  map[string]any `json:"values"`
	Entries []Entry        `json:"keys"`
	// Defaults are the input's values left out as equal to the official chart's defaults
	// (WithDefaults), by path; DefaultsOf names that chart's version.
	Defaults   []string `json:"defaults,omitempty"`
	DefaultsOf string   `json:"defaultsOf,omitempty"`
}

// Unmapped lists the keys ours cannot express.
func (r *Result) Unmapped() []Entry { return r.only(Unmapped) }

// Ignored lists the keys dropped because they have no effect in ours.
func (r *Result) Ignored() []Entry { return r.only(Ignored) }

func (r *Result) only(a Action) []Entry {
	var out []Entry
	for _, e := range r.Entries {
		if e.Action == a {
			out = append(out, e)
		}
	}
	return out
}

// UnmappedError lists the keys that could not be converted, each with its reason.
type UnmappedError struct {
	Source string
	Keys   []Entry
}

func (e *UnmappedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d key(s) of the official chart cannot be expressed in ours:", e.Source, len(e.Keys))
	for _, k := range e.Keys {
		fmt.Fprintf(&b, "\n  %s: %s", k.Key, k.Reason)
	}
	b.WriteString("\nfix: remove them from the values (or do what each says), or pass --allow-unmapped to go on without them")
	return b.String()
}

// Convert converts official values. It never fails on a value: what cannot be converted is
// an Unmapped entry. Values that are objects of the wrong type are Unmapped too. With
// WithDefaults, the values equal to the official chart's defaults are left out first, as if
// the input had not set them.
func Convert(in map[string]any, opts ...Option) *Result {
	c := &converter{in: in, out: map[string]any{}}
	for _, o := range opts {
		o(c)
	}
	var left []string
	if c.defaults != nil {
		c.in, left = leaveOutDefaults(in, c.defaults, "")
	}
	c.walk("", c.in)
	c.carryImplicitDefaults()
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].Key < c.entries[j].Key })
	return &Result{Values: c.out, Entries: c.entries, Defaults: left, DefaultsOf: c.defaultsOf}
}

type converter struct {
	in      map[string]any
	out     map[string]any
	entries []Entry
	// defaults are the official chart's (WithDefaults), of version defaultsOf.
	defaults   map[string]any
	defaultsOf string
}

func (c *converter) walk(path string, v any) {
	if path != "" {
		if r, component, ok := lookup(path); ok {
			c.apply(r, component, path, v)
			return
		}
	}
	m, isMap := v.(map[string]any)
	if !isMap || (len(m) == 0 && path != "") {
		if path == "" {
			return
		}
		if isEmpty(v) {
			c.entries = append(c.entries, Entry{Key: path, Action: Ignored, Reason: "empty"})
			return
		}
		c.entries = append(c.entries, Entry{Key: path, Action: Unmapped,
			Reason: "not a key of the official chart 2.x that this table knows (a typo, a newer chart's key, or a Bitnami subchart key other than those listed in docs/migrating-from-official-chart.md)"})
		return
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		c.walk(p, m[k])
	}
}

// lookup finds the rule of a path: a rule written for it alone wins over one for several
// components.
func lookup(path string) (rule, string, bool) {
	var found *rule
	var component string
	for i := range table {
		r := table[i]
		if cmp, ok := r.match(path); ok {
			if found == nil || (len(found.comps) > 0 && len(r.comps) == 0) {
				found, component = &table[i], cmp
			}
		}
	}
	if found == nil {
		return rule{}, "", false
	}
	return *found, component, true
}

func (c *converter) apply(r rule, component, path string, v any) {
	note := bind(r.note, component)
	entry := Entry{Key: path, Action: r.action, Reason: note}
	if g := bind(r.guard, component); g != "" {
		if on, _ := values.Lookup(c.in, g); on != true {
			entry.Action, entry.Reason = Ignored, g+" is off"
			c.entries = append(c.entries, entry)
			return
		}
	}
	switch {
	case r.hasDefault && sameValue(v, r.official):
		entry.Action, entry.Reason = Ignored, "the official default"
		if why := r.defaultWhy; why != "" {
			entry.Reason += ": " + why
		} else if note != "" {
			entry.Reason += "; " + note
		}
	case isEmpty(v) && r.action != Ignored:
		entry.Action, entry.Reason = Ignored, "empty"
	case r.action == Ignored && r.hasDefault:
		entry.Action = Unmapped // a value the official chart changes and ours cannot
	case r.action == Mapped:
		var out []assign
		lost := ""
		if r.fn != nil {
			out, lost = r.fn(v, c.in)
		} else {
			out = []assign{{path: bind(r.to[0], component), value: v}}
		}
		for _, a := range out {
			c.set(a.path, a.value)
			entry.To = append(entry.To, a.path)
		}
		switch {
		case lost != "":
			entry.Action, entry.Reason = Unmapped, lost
		case len(out) == 0:
			entry.Action = Ignored
		}
	}
	c.entries = append(c.entries, entry)
}

// set writes value at a dotted path of the output; an earlier map there is merged into.
func (c *converter) set(path string, value any) {
	keys := strings.Split(path, ".")
	m := c.out
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	last := keys[len(keys)-1]
	if old, ok := m[last].(map[string]any); ok {
		if nv, ok := value.(map[string]any); ok {
			m[last] = values.Merge(old, nv)
			return
		}
	}
	m[last] = values.DeepCopy(map[string]any{"v": value})["v"]
}

// carryImplicitDefaults writes the official defaults that behave differently in ours and that
// a file which relies on them (by leaving the key out) still means.
func (c *converter) carryImplicitDefaults() {
	// A NodePort gateway: the official chart fixes its node port (31811); ours lets
	// Kubernetes pick one, which would move the address users reach.
	if typ, _ := values.Lookup(c.in, "gateway.service.type"); typ == "NodePort" {
		if _, set := values.Lookup(c.in, "gateway.service.nodePort"); !set {
			c.set("gateway.service.nodePort", officialNodePort)
			c.entries = append(c.entries, Entry{Key: "gateway.service.nodePort", Action: Mapped, To: []string{"gateway.service.nodePort"},
				Reason: "not set: the official default (31811) is written, since ours lets Kubernetes pick the node port"})
		}
	}
}
