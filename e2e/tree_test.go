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

// The tree keeps the shape ARCHITECTURE.md promises: no non-test Go file over 500 lines, and
// nothing under charts/ importing the installer (the chart sits below it).
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		assert.LessOrEqual(t, bytes.Count(b, []byte("\n")), 500, "%s: over 500 lines; split it by what its parts do", rel)
		if strings.HasPrefix(rel, "charts"+string(filepath.Separator)) {
			f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				assert.False(t, strings.HasPrefix(p, module+"installer"), "%s imports %s: charts/ sits below the installer", rel, p)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
