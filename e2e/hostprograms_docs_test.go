package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

var update = flag.Bool("update", false, "rewrite generated docs tables from the code")

// docs/development.md's tables of Polyaxon's programs and of the host rewrites are the ones the
// local provider applies. Run with -update to rewrite them from the code.
func TestReadmeHostProgramTables(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	path := filepath.Join(root, "docs", "development.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)

	var programs strings.Builder
	programs.WriteString("| image | containers | runs here | the image sets, and so do we |\n|---|---|---|---|\n")
	for _, p := range append(slices.Clone(local.PolyaxonProgramTable), local.RunProgramTable...) {
		fmt.Fprintf(&programs, "| `%s` | %s | %s | %s |\n", p.Image, p.Containers, p.Runs, orDash(p.ImageSets))
	}
	var rewrites strings.Builder
	rewrites.WriteString("| in the container | on this machine | why |\n|---|---|---|\n")
	for _, r := range local.HostRewrites {
		fmt.Fprintf(&rewrites, "| %s | %s | %s |\n", r.Container, r.Host, r.Why)
	}
	updated := readme
	for marker, table := range map[string]string{"polyaxon-programs": programs.String(), "host-rewrites": rewrites.String()} {
		updated = replaceBlock(t, updated, marker, table)
	}
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(updated), 0o644))
		return
	}
	assert.Equal(t, updated, readme, "docs/development.md's host program tables differ from the code: go test ./e2e -run TestReadmeHostProgramTables -update")
}

// replaceBlock puts body between `<!-- marker: ... -->` and `<!-- end marker -->`.
func replaceBlock(t *testing.T, doc, marker, body string) string {
	t.Helper()
	open := "<!-- " + marker + ":"
	i := strings.Index(doc, open)
	require.GreaterOrEqualf(t, i, 0, "docs/development.md has no %s block", marker)
	i += strings.Index(doc[i:], "-->\n") + len("-->\n")
	j := strings.Index(doc, "<!-- end "+marker+" -->")
	require.GreaterOrEqualf(t, j, i, "docs/development.md: %s block not closed", marker)
	return doc[:i] + body + doc[j:]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
