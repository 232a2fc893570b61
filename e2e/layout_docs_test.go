package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

var codeSpan = regexp.MustCompile("`([^`]+)`")

// The layout table of docs/development.md and ARCHITECTURE.md name the tree as it is: every
// top-level directory, command and installer package is in the table, and every path either
// document names exists.
func TestLayoutDocsMatchTheTree(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	dev, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	require.NoError(t, err)
	_, layout, ok := strings.Cut(string(dev), "\n## Layout\n")
	require.True(t, ok, "docs/development.md has no Layout section")
	layout, _, _ = strings.Cut(layout, "\n## ")

	paths := map[string]string{} // path in the first column -> the row's text
	for _, line := range strings.Split(layout, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			p := strings.TrimSuffix(m[1], "/")
			paths[p] = cells[2]
			_, err := os.Stat(filepath.Join(root, p))
			assert.NoError(t, err, "the layout table names %s", p)
		}
	}
	named := func(dir string) bool {
		for p := range paths {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				return true
			}
		}
		return false
	}
	for _, parent := range []string{".", "cmd"} {
		entries, err := os.ReadDir(filepath.Join(root, parent))
		require.NoError(t, err)
		for _, e := range entries {
			name := filepath.ToSlash(filepath.Join(parent, e.Name()))
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || name == "bin" || name == "dist" {
				continue
			}
			assert.True(t, named(name), "the layout table does not name %s", name)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "installer"))
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			assert.Regexp(t, `\b`+e.Name()+`\b`, paths["installer"], "the layout table's installer row does not name %s", e.Name())
		}
	}

	arch, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	require.NoError(t, err)
	// Fences are not code spans: without them, the spans pair up as written.
	for _, m := range codeSpan.FindAllStringSubmatch(strings.ReplaceAll(string(arch), "```", ""), -1) {
		p := m[1]
		switch {
		case strings.HasPrefix(p, "installer/") || strings.HasPrefix(p, "cmd/") || strings.HasPrefix(p, "charts/"):
			_, err := os.Stat(filepath.Join(root, p))
			assert.NoError(t, err, "ARCHITECTURE.md names %s", p)
		case strings.HasSuffix(p, ".go"):
			matches, _ := filepath.Glob(filepath.Join(root, "installer", "*", p))
			assert.NotEmpty(t, matches, "ARCHITECTURE.md names %s", p)
		}
	}
}
