package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The convertFuncs of the table: values whose shape differs between the two charts.

// moveTo writes the value unchanged at to.
func moveTo(to string) convertFunc {
	return func(v any, _ map[string]any) ([]assign, string) {
		return []assign{{path: to, value: v}}, ""
	}
}

// dropEmpty writes the value unless it is empty (the official chart's null means "ours'
// default").
func dropEmpty(to string) convertFunc {
	return func(v any, _ map[string]any) ([]assign, string) {
		if isEmpty(v) {
			return nil, ""
		}
		return []assign{{path: to, value: v}}, ""
	}
}

// nodePort keeps the gateway's node port only where Kubernetes uses one.
func nodePort(v any, in map[string]any) ([]assign, string) {
	typ := ""
	if g, ok := in["gateway"].(map[string]any); ok {
		if s, ok := g["service"].(map[string]any); ok {
			typ, _ = s["type"].(string)
		}
	}
	if typ != "NodePort" && typ != "LoadBalancer" {
		return nil, ""
	}
	return []assign{{path: "gateway.service.nodePort", value: v}}, ""
}

// globalAnnotations: the official chart gives every platform pod the global annotations,
// unless the component has its own (which then replace them).
func globalAnnotations(v any, in map[string]any) ([]assign, string) {
	if _, ok := v.(map[string]any); !ok {
		return nil, "not a map of annotations"
	}
	var out []assign
	for _, c := range platform {
		if own, ok := in[c].(map[string]any); ok && !isEmpty(own["annotations"]) {
			continue
		}
		out = append(out, assign{path: c + ".podAnnotations", value: v})
	}
	out = append(out, assign{path: "migrations.podAnnotations", value: v})
	return out, ""
}

// encryptionKeys are the keys of the official chart's encryption Secret that Polyaxon reads
// (its whole Secret is given to the platform with envFrom).
var encryptionKeys = []string{"POLYAXON_ENCRYPTION_BACKEND", "POLYAXON_ENCRYPTION_KEY", "POLYAXON_ENCRYPTION_SECRET"}

// encryptionProcesses read encrypted fields: the API and the Celery processes.
var encryptionProcesses = []string{"gateway", "scheduler", "worker", "beat"}

// encryptionSecret gives the gateway and Celery processes the encryption keys from the same
// Secret, each optional, so a Secret holding only some of them still works.
func encryptionSecret(v any, in map[string]any) ([]assign, string) {
	name, ok := v.(string)
	if !ok {
		return nil, "encryptionSecret is the name of a Secret"
	}
	var env []any
	for _, k := range encryptionKeys {
		env = append(env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": name, "key": k, "optional": true}}})
	}
	var out []assign
	for _, c := range encryptionProcesses {
		have := []any{}
		if own, ok := in[c].(map[string]any); ok {
			if l, ok := own["extraEnv"].([]any); ok {
				have = l
			}
		}
		out = append(out, assign{path: c + ".extraEnv", value: append(append([]any{}, have...), env...)})
	}
	return out, ""
}

// artifactsStore reshapes Polyaxon's connection spelling of the store ({name, kind, schema:
// {...}, secret, configMap}) into ours, where the schema's fields sit on the store itself.
func artifactsStore(v any, _ map[string]any) ([]assign, string) {
	s, ok := v.(map[string]any)
	if !ok {
		return nil, "artifactsStore is a map"
	}
	var out []assign
	var lost []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		val := s[k]
		switch k {
		case "name", "kind":
			out = append(out, assign{path: "artifactsStore." + k, value: val})
		case "secret":
			if sec, ok := val.(map[string]any); ok {
				for _, sk := range slices.Sorted(maps.Keys(sec)) {
					if sk == "name" || sk == "mountPath" {
						out = append(out, assign{path: "artifactsStore.secret." + sk, value: sec[sk]})
					} else {
						lost = append(lost, "secret."+sk)
					}
				}
			}
		case "schema":
			sch, ok := val.(map[string]any)
			if !ok {
				lost = append(lost, "schema (not a map)")
				continue
			}
			for _, sk := range slices.Sorted(maps.Keys(sch)) {
				switch sk {
				case "mountPath", "hostPath", "bucket":
					out = append(out, assign{path: "artifactsStore." + sk, value: sch[sk]})
				case "volumeClaim":
					out = append(out, assign{path: "artifactsStore.persistence.existingClaim", value: sch[sk]})
				case "readOnly":
					if sch[sk] == true {
						lost = append(lost, "schema.readOnly (runs write to the store)")
					}
				default:
					lost = append(lost, "schema."+sk)
				}
			}
		case "configMap", "env":
			if !isEmpty(val) {
				lost = append(lost, k)
			}
		default:
			if !isEmpty(val) {
				lost = append(lost, k)
			}
		}
	}
	if len(lost) > 0 {
		return out, fmt.Sprintf("artifactsStore: %s cannot be expressed in ours (the rest was converted): ours mounts the store whole, takes its credentials from secret, and has no configMap or env for it", strings.Join(lost, ", "))
	}
	return out, ""
}
