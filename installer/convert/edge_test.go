package convert

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The official chart had no authenticating edge: the conversion says so, and says more when
// its Ingress let anyone in (issue 42).
func TestEdgeNote(t *testing.T) {
	exposed := Convert(map[string]any{"ingress": map[string]any{"enabled": true}})
	assert.Contains(t, exposed.EdgeNote(), "its Ingress let anyone who reached it use the platform")
	assert.Contains(t, exposed.EdgeNote(), "set edge.oidc or edge.htpasswd")
	inside := Convert(map[string]any{"timezone": "UTC"})
	assert.Contains(t, inside.EdgeNote(), "the official chart had no authenticating edge")
	assert.NotContains(t, inside.EdgeNote(), "its Ingress")
	var found bool
	for _, w := range exposed.Warnings("official.yaml") {
		found = found || (w.Path == "edge" && w.Message == exposed.EdgeNote())
	}
	assert.True(t, found, "adopt and --from-official-values show it")
}
