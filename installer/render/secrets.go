package render

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// SecretValues are the values that land in the rendered Secrets (generated passwords
// included): anything printed outside the Secret itself is a leak, so a redact.Scrubber learns
// them. Keys that name an identity (a user name, a host) are left out: masking "polyaxon"
// everywhere would hide nothing and garble every message.
func SecretValues(ms []Manifest) []string {
	var out []string
	for _, m := range ms {
		if m.Kind() != "Secret" || m.Object == nil {
			continue
		}
		if data, ok := m.Object.Object["data"].(map[string]any); ok {
			for k, v := range data {
				if s, ok := v.(string); ok && !redact.IsIdentityKey(k) {
					if b, err := base64.StdEncoding.DecodeString(s); err == nil {
						out = append(out, string(b))
					}
				}
			}
		}
		if data, ok := m.Object.Object["stringData"].(map[string]any); ok {
			for k, v := range data {
				if s, ok := v.(string); ok && !redact.IsIdentityKey(k) {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// A generated secret: the chart fills a Secret with random values unless the user gives them
// (or names an existing Secret). With cluster access the chart reads the values back
// (lookup) and they stay; without it every render makes new ones.
type generatedSecret struct {
	component string   // the Secret's component (polyaxon-<component>)
	enabled   string   // values path that turns the Secret on ("": always)
	values    []string // values that, all set, leave nothing to generate (nil: something always is)
	existing  string   // values path naming a Secret the user manages instead
}

var generatedSecrets = []generatedSecret{
	{component: "platform", values: []string{"secrets.secretKey", "secrets.internalToken", "secrets.adminPassword"}, existing: "secrets.existingSecret"},
	{component: "postgresql", enabled: "postgresql.enabled", values: []string{"postgresql.auth.password"}, existing: "postgresql.auth.existingSecret"},
	// The Erlang cookie has no value of its own: only an existing Secret avoids generating it.
	{component: "rabbitmq", enabled: "rabbitmq.enabled", existing: "rabbitmq.auth.existingSecret"},
	{component: "redis", enabled: "redis.enabled", values: []string{"redis.auth.password"}, existing: "redis.auth.existingSecret"},
}

// OfflineSecretsWarning says which Secrets an offline render (no cluster to read existing
// values from) fills with new random values, and which existingSecret values avoid it. Empty
// when nothing is generated, or when the rendered objects include no Secret (--show-only).
func OfflineSecretsWarning(vals map[string]any, ms []Manifest) string {
	hasSecret := false
	for _, m := range ms {
		if m.Kind() == "Secret" {
			hasSecret = true
			break
		}
	}
	if !hasSecret {
		return ""
	}
	var components, fixes []string
	for _, g := range generatedSecrets {
		if g.enabled != "" && !set(vals, g.enabled) {
			continue
		}
		if set(vals, g.existing) {
			continue
		}
		generated := g.values == nil
		for _, v := range g.values {
			if !set(vals, v) {
				generated = true
			}
		}
		if generated {
			components = append(components, g.component)
			fixes = append(fixes, g.existing)
		}
	}
	if len(components) == 0 {
		return ""
	}
	return fmt.Sprintf("rendered without cluster access: the %s Secret(s) get new random values on every render, so a GitOps tool that renders offline would rotate them on every sync; "+
		"create the Secrets once and set %s (an install or upgrade by polyaxon-deploy or helm keeps the values it finds in the cluster)",
		strings.Join(components, ", "), strings.Join(fixes, ", "))
}

// set reports whether the value at path is given (true, non-empty).
func set(vals map[string]any, path string) bool {
	v, _ := values.Lookup(vals, path)
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	}
	return true
}
