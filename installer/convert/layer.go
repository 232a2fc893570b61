package convert

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Check returns an *UnmappedError when keys could not be converted and allowUnmapped is
// false.
func (r *Result) Check(source string, allowUnmapped bool) error {
	if un := r.Unmapped(); len(un) > 0 && !allowUnmapped {
		return &UnmappedError{Source: source, Keys: un}
	}
	return nil
}

// YAML is the converted values as a values file.
func (r *Result) YAML() ([]byte, error) {
	if len(r.Values) == 0 {
		return []byte("{}\n"), nil
	}
	return yaml.Marshal(r.Values)
}

// Counts returns how many keys were mapped, ignored and left unmapped.
func (r *Result) Counts() (mapped, ignored, unmapped int) {
	for _, e := range r.Entries {
		switch e.Action {
		case Mapped:
			mapped++
		case Ignored:
			ignored++
		case Unmapped:
			unmapped++
		}
	}
	return
}

// Warnings says, for a conversion done in memory, what a user would otherwise not see: a
// summary, every key left out (allowed), and every value the user set that ours ignores.
// Keys that were empty, at the official default or under a switch that is off are counted
// in the summary only.
func (r *Result) Warnings(source string) []values.Warning {
	mapped, ignored, unmapped := r.Counts()
	out := []values.Warning{{Source: source, Message: fmt.Sprintf(
		"converted from the official polyaxon/polyaxon chart: %d key(s) mapped, %d ignored (no effect in ours), %d not mapped%s; `polyaxon-deploy convert-values` lists each with its reason",
		mapped, ignored, unmapped, r.defaultsNote())}}
	out = append(out, values.Warning{Source: source, Path: "edge", Message: r.EdgeNote()})
	for _, e := range r.Entries {
		switch {
		case e.Action == Unmapped:
			out = append(out, values.Warning{Source: source, Path: e.Key, Message: e.Key + " is not carried over (--allow-unmapped): " + e.Reason})
		case e.Action == Ignored && !routine(e.Reason):
			out = append(out, values.Warning{Source: source, Path: e.Key, Message: e.Key + " is ignored: " + e.Reason})
		}
	}
	return out
}

// EdgeNote says that the official chart had no authenticating edge, and what that means for
// the converted release (issue 42): Polyaxon CE asks nobody to log in, so an Ingress of the
// official chart let anyone who reached it use the platform.
func (r *Result) EdgeNote() string {
	const edge = "the official chart had no authenticating edge (Polyaxon CE asks nobody to log in)"
	ingress, _ := r.Values["ingress"].(map[string]any)
	if on, _ := ingress["enabled"].(bool); on {
		return edge + ": its Ingress let anyone who reached it use the platform. Ours puts oauth2-proxy in front (edge.*, on in the production profile, which then refuses to render without a way to log in): set edge.oidc or edge.htpasswd, see docs/authentication.md"
	}
	return edge + "; ours puts oauth2-proxy in front of an Ingress or HTTPRoute (edge.*, on in the production profile): see docs/authentication.md"
}

// DefaultsSummary says how many values were left out as the official chart's defaults ("" when
// the defaults were kept).
func (r *Result) DefaultsSummary() string {
	if r.DefaultsOf == "" {
		return ""
	}
	return fmt.Sprintf("%d value(s) equal to the official chart %s's defaults left out (not choices of yours: ours' defaults apply; --keep-defaults keeps them)", len(r.Defaults), r.DefaultsOf)
}

func (r *Result) defaultsNote() string {
	if r.DefaultsOf == "" {
		return ""
	}
	return fmt.Sprintf(", %d left out as the official chart %s's defaults", len(r.Defaults), r.DefaultsOf)
}

// routine reasons need no warning of their own.
func routine(reason string) bool {
	return reason == "empty" || strings.HasPrefix(reason, "the official default") || strings.HasSuffix(reason, " is off")
}
