package values_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// What a Helm revision has and a replay would change or drop is listed by path; what both
// have alike (a float from Helm's storage, an int from --set) and what only the replay adds
// are not.
func TestChanges(t *testing.T) {
	old := map[string]any{
		"gateway":  map[string]any{"replicas": float64(3), "pdb": map[string]any{"enabled": true}},
		"logLevel": "DEBUG",
		"ingress":  map[string]any{"hosts": []any{"a.example.com"}},
		"postgresql": map[string]any{
			"auth": map[string]any{"password": "hunter22"},
		},
		"empty": map[string]any{},
	}
	new := map[string]any{
		"gateway":    map[string]any{"replicas": 2, "pdb": map[string]any{"enabled": true}},
		"ingress":    map[string]any{"hosts": []string{"a.example.com"}},
		"postgresql": map[string]any{"auth": map[string]any{"password": "other"}},
		"added":      true,
	}
	cs := values.Changes(old, new)
	assert.Equal(t, []values.Change{
		{Path: "gateway.replicas", Old: float64(3), New: float64(2)},
		{Path: "logLevel", Old: "DEBUG", Dropped: true},
		{Path: "postgresql.auth.password", Old: "hunter22", New: "other"},
	}, cs)
	text := values.FormatChanges(cs)
	assert.Contains(t, text, "gateway.replicas: 3 -> 2\nlogLevel: \"DEBUG\" -> dropped\n")
	assert.Contains(t, text, "postgresql.auth.password: (secret) -> (changed)")
	assert.NotContains(t, text, "hunter22")
	assert.Empty(t, values.Changes(new, new))
}
