package e2e

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// The tree keeps the shape ARCHITECTURE.md promises: no non-test Go file or shell script over 500 lines,
// nothing under charts/, profiles/ or values/ importing the installer (the chart sits below
// it), and nothing that ships importing the test tree (e2e/, its harnesses among it).
func TestTreeKeepsItsShape(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	const module = "github.com/polyaxon-deploy/polyaxon-deploy/"
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".sh") { // shell scripts keep the same bound
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			assert.LessOrEqual(t, bytes.Count(b, []byte("\n")), 500, "%s: over 500 lines; split it by what its parts do", rel)
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		assert.LessOrEqual(t, bytes.Count(b, []byte("\n")), 500, "%s: over 500 lines; split it by what its parts do", rel)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		above := map[string][]string{ // a tree -> the trees it may not import
			"charts":    {"installer", "e2e"},
			"profiles":  {"installer", "e2e"},
			"values":    {"installer", "e2e"},
			"installer": {"e2e"},
			"cmd":       {"e2e"},
		}[top]
		if len(above) == 0 {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, tree := range above {
				assert.False(t, p == module+tree || strings.HasPrefix(p, module+tree+"/"), "%s imports %s: %s/ sits below %s/ (the chart and its values below the installer, all that ships below the tests)", rel, p, top, tree)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
