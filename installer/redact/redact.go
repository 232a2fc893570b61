// Package redact keeps secret values out of what polyaxon-deploy prints and logs: warnings,
// results, errors and the debug log. Two complementary tools:
//
//   - by path: a values key whose words include password, secret, token or key holds a secret
//     (Values masks them in a values tree; IsSecretKey answers for one key);
//   - by value: a Scrubber knows the secret strings of this run (from the inputs and from the
//     rendered Secrets) and masks them wherever they appear in free text.
//
// Rendered Secret objects and a backup's secrets.json carry the real values: they are the
// place where secrets belong, and are never passed through this package.
package redact

import (
	"fmt"
	"strings"
	"unicode"
)

// Mask replaces a secret value.
const Mask = "<redacted>"

// secretWords are the words that make a key secret-like.
var secretWords = map[string]bool{"password": true, "passwd": true, "secret": true, "token": true, "key": true}

// references are keys that name a Secret or a key inside one (or a label key): they hold no
// secret, and masking them would hide what the user needs to fix.
var references = []string{"existingsecret", "secretname", "passwordkey", "usernamekey", "topologykey"}

// IsSecretKey reports whether a values key (the last segment of a path) holds a secret: one of
// its words (camelCase, snake_case, kebab-case) is password, secret, token or key, and it is
// not a reference to a Secret (existingSecret, passwordKey, ...).
func IsSecretKey(key string) bool {
	lower := strings.ToLower(key)
	for _, r := range references {
		if strings.HasSuffix(lower, r) {
			return false
		}
	}
	for _, w := range words(key) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// selectorLists hold {key, operator, ...} items whose key is a label or taint key.
var selectorLists = map[string]bool{"tolerations": true, "matchExpressions": true}

// identityWords name things (a user, a host, a database) rather than hold a secret.
var identityWords = map[string]bool{"user": true, "username": true, "host": true, "hostname": true, "port": true,
	"database": true, "db": true, "dbname": true, "name": true, "namespace": true, "email": true}

// IsIdentityKey reports whether a key (of a Secret's data, say) names an identity rather than a
// secret: postgres-user, DB_HOST, email. A secret-like key never is (admin-user-password).
func IsIdentityKey(key string) bool {
	if IsSecretKey(key) {
		return false
	}
	for _, w := range words(key) {
		if identityWords[w] {
			return true
		}
	}
	return false
}

// IsSecretPath is IsSecretKey of a dotted path's last segment (a list index is dropped:
// "x.tokens[0]" is "tokens"), except the key of a toleration or selector requirement
// (tolerations.core[0].key).
func IsSecretPath(path string) bool {
	segs := strings.Split(path, ".")
	for i, s := range segs {
		if j := strings.IndexByte(s, '['); j >= 0 {
			segs[i] = s[:j]
		}
	}
	last := segs[len(segs)-1]
	if last == "key" {
		for _, s := range segs[:len(segs)-1] {
			if selectorLists[s] {
				return false
			}
		}
	}
	return IsSecretKey(last)
}

// words splits a key into lower-case words at case changes, digits and separators.
func words(key string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r):
			flush()
		case unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(cur[len(cur)-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// secretLeaf reports whether parent[key] is a secret: a secret-like key, except the "key" of a
// toleration or a label selector requirement (a map that also has "operator").
func secretLeaf(parent map[string]any, key string) bool {
	if !IsSecretKey(key) {
		return false
	}
	if key == "key" {
		if _, ok := parent["operator"]; ok {
			return false
		}
	}
	return true
}

// Values returns a copy of a values tree with every secret value masked. Empty values stay
// empty, so "not set" is still visible.
func Values(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if secretLeaf(m, k) && !empty(v) {
			if _, isMap := v.(map[string]any); !isMap {
				out[k] = Mask
				continue
			}
		}
		out[k] = value(v)
	}
	return out
}

func value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return Values(t)
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = value(x)
		}
		return l
	}
	return v
}

// Any masks the secrets of v when it is a values tree or a list of them; other values are
// returned as they are.
func Any(v any) any { return value(v) }

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case []any:
		return len(t) == 0
	}
	return false
}

// Secrets returns the secret values of a values tree as strings (scalars only), for a
// Scrubber.
func Secrets(m map[string]any) []string {
	var out []string
	var walk func(parent map[string]any)
	var walkAny func(v any)
	walk = func(parent map[string]any) {
		for k, v := range parent {
			if secretLeaf(parent, k) {
				out = append(out, scalars(v)...)
				continue
			}
			walkAny(v)
		}
	}
	walkAny = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			walk(t)
		case []any:
			for _, x := range t {
				walkAny(x)
			}
		}
	}
	walk(m)
	return out
}

// scalars are the strings and numbers in v (a secret given as a list or a map is all secret).
func scalars(v any) []string {
	switch t := v.(type) {
	case nil, bool:
		return nil
	case string:
		if t == "" {
			return nil
		}
		return []string{t}
	case map[string]any:
		var out []string
		for _, x := range t {
			out = append(out, scalars(x)...)
		}
		return out
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, scalars(x)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}
