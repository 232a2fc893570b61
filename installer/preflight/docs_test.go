package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// Every check's hint links to docs/preflight-checks.md#check-<id> (check.DocsBase): each ID,
// of the preflight checks and of an installed release's, needs its heading there.
func TestEveryCheckIsDocumented(t *testing.T) {
	const page = "docs/preflight-checks.md"
	require.True(t, strings.HasSuffix(check.DocsBase, "/blob/main/"+page+"#"), "check.DocsBase points at %s", page)
	raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(page)))
	require.NoError(t, err)
	doc := string(raw)
	ids := IDs()
	require.NotEmpty(t, ids)
	// And the checks of an installed release (`check` without --pre), read from PostChecks so
	// that a new one cannot go undocumented.
	for _, c := range PostChecks(&Env{}) {
		ids = append(ids, c.ID)
	}
	for _, id := range ids {
		assert.True(t, strings.Contains(doc, "\n### check-"+id+"\n"), "%s has no heading `### check-%s`", page, id)
	}
}
