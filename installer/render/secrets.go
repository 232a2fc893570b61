package render

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
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
	component string                             // the Secret's component (polyaxon-<component>)
	on        func(v *chartvalues.Values) bool   // whether the chart renders the Secret
	given     func(v *chartvalues.Values) bool   // every value given: nothing to generate
	existing  string                             // the value naming a Secret the user manages instead
	named     func(v *chartvalues.Values) string // that value
}

func always(*chartvalues.Values) bool { return true }
func never(*chartvalues.Values) bool  { return false }

var generatedSecrets = []generatedSecret{
	{component: "platform", on: always,
		given: func(v *chartvalues.Values) bool {
			s := v.Secrets
			return s.SecretKey != "" && s.InternalToken != "" && s.AdminPassword != ""
		},
		existing: "secrets.existingSecret", named: func(v *chartvalues.Values) string { return v.Secrets.ExistingSecret }},
	{component: "postgresql", on: func(v *chartvalues.Values) bool { return v.Postgresql.Enabled },
		given:    func(v *chartvalues.Values) bool { return v.Postgresql.Auth.Password != "" },
		existing: "postgresql.auth.existingSecret", named: func(v *chartvalues.Values) string { return v.Postgresql.Auth.ExistingSecret }},
	// The Erlang cookie has no value of its own: only an existing Secret avoids generating it.
	{component: "rabbitmq", on: func(v *chartvalues.Values) bool { return v.RabbitMQ.Enabled }, given: never,
		existing: "rabbitmq.auth.existingSecret", named: func(v *chartvalues.Values) string { return v.RabbitMQ.Auth.ExistingSecret }},
	{component: "redis", on: func(v *chartvalues.Values) bool { return v.Redis.Enabled },
		given:    func(v *chartvalues.Values) bool { return v.Redis.Auth.Password != "" },
		existing: "redis.auth.existingSecret", named: func(v *chartvalues.Values) string { return v.Redis.Auth.ExistingSecret }},
}

// OfflineSecretsWarning says which Secrets an offline render (no cluster to read existing
// values from) fills with new random values, and which existingSecret values avoid it. Empty
// when nothing is generated, or when the rendered objects include no Secret (--show-only).
func OfflineSecretsWarning(v *chartvalues.Values, ms []Manifest) string {
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
		if !g.on(v) || g.named(v) != "" || g.given(v) {
			continue
		}
		components = append(components, g.component)
		fixes = append(fixes, g.existing)
	}
	if len(components) == 0 {
		return ""
	}
	return fmt.Sprintf("rendered without cluster access: the %s Secret(s) get new random values on every render, so a GitOps tool that renders offline would rotate them on every sync; "+
		"create the Secrets once and set %s (an install or upgrade by polyaxon-deploy or helm keeps the values it finds in the cluster)",
		strings.Join(components, ", "), strings.Join(fixes, ", "))
}
