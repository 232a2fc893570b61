package convert

import (
	"encoding/json"
	"strings"
)

// Action is what happens to one key of the official chart's values.
type Action string

const (
	// Mapped: the value lands in ours, under another spelling or shape.
	Mapped Action = "mapped"
	// Ignored: the key has no effect in ours, or its value is the official default and ours
	// behaves the same (or better, as the reason says). Listed, never an error.
	Ignored Action = "ignored"
	// Unmapped: the value changes the official chart's behaviour in a way ours cannot express.
	// An error unless the caller allows it.
	Unmapped Action = "unmapped"
)

// comp is the placeholder of a rule written once for several components.
const comp = "{c}"

// assign is one value written into our values.
type assign struct {
	path  string
	value any
}

// convertFunc reshapes one value. in is the whole official document, for rules whose result
// depends on a sibling (a nodePort kept only with a NodePort Service). It returns what to
// write and, when some of the value could not be kept, why.
type convertFunc func(v any, in map[string]any) (out []assign, lost string)

// rule is one row of the table: an official key (a dotted path, {c} standing for each of
// comps) and what becomes of it. A rule on a path takes the whole value under it.
type rule struct {
	from   string
	to     []string // our paths, for the table (and the default move)
	action Action
	note   string // how it is reshaped, or why it is ignored or unmapped
	comps  []string

	// official is the official chart's default: a value equal to it is Ignored (defaultWhy
	// says what ours does instead). hasDefault tells a nil default from none. An Ignored
	// rule with a default refuses other values: the user changed what ours cannot change.
	official   any
	hasDefault bool
	defaultWhy string
	// guard names the official switch (a path, {c} allowed) without which the key does
	// nothing; its official default is off.
	guard string
	fn    convertFunc
}

// move writes the value unchanged at to.
func move(from, to string) rule {
	return rule{from: from, to: []string{to}, action: Mapped}
}

// reshape writes what fn makes of the value; to lists the destinations for the table.
func reshape(from string, to []string, note string, fn convertFunc) rule {
	return rule{from: from, to: to, action: Mapped, note: note, fn: fn}
}

// ignore drops the key, whatever its value: it has no effect in ours.
func ignore(from, why string) rule {
	return rule{from: from, action: Ignored, note: why}
}

// unmapped refuses any value but an empty one: ours cannot do what it asks.
func unmapped(from, why string) rule {
	return rule{from: from, action: Unmapped, note: why}
}

// orDefault: a value equal to the official chart's default is Ignored (why says what ours
// does instead; empty: the rule's note).
func (r rule) orDefault(official any, why string) rule {
	r.official, r.hasDefault, r.defaultWhy = official, true, why
	return r
}

// onlyWith: the key does nothing unless the official switch guard is on (off by default).
func (r rule) onlyWith(guard string) rule {
	r.guard = guard
	return r
}

// forEach writes the rule once for several components ({c} in from, to, note and guard).
func (r rule) forEach(comps ...string) rule {
	r.comps = comps
	return r
}

// match reports whether the rule is about path, and for which component.
func (r rule) match(path string) (component string, ok bool) {
	if len(r.comps) == 0 {
		return "", r.from == path
	}
	for _, c := range r.comps {
		if strings.ReplaceAll(r.from, comp, c) == path {
			return c, true
		}
	}
	return "", false
}

// covers reports whether path is the rule's key, under it, or above it (a map whose keys
// the table takes one by one).
func (r rule) covers(path string) bool {
	froms := []string{r.from}
	if len(r.comps) > 0 {
		froms = froms[:0]
		for _, c := range r.comps {
			froms = append(froms, strings.ReplaceAll(r.from, comp, c))
		}
	}
	for _, f := range froms {
		if f == path || strings.HasPrefix(path, f+".") || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}

func bind(s, component string) string { return strings.ReplaceAll(s, comp, component) }

// isEmpty: nothing set (null, "", {} or []).
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// sameValue compares YAML values the way they print (1800 and 1800.0 are the same).
func sameValue(a, b any) bool {
	if isEmpty(a) && isEmpty(b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
