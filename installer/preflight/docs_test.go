package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every check's hint links to README.md#check-<id>: each ID needs its heading there.
func TestEveryCheckIsDocumentedInTheReadme(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	readme := string(raw)
	ids := IDs()
	require.NotEmpty(t, ids)
	for _, id := range append(ids, "release-deployed", "release-origin", "gateway-route-status", "workloads-ready") {
		assert.True(t, strings.Contains(readme, "\n### check-"+id+"\n"), "README.md has no heading `### check-%s`", id)
	}
}
