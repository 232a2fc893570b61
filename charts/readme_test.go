package charts_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartdoc"
)

// update rewrites generated files (the README values table) instead of comparing them.
// Other generated-file tests in this package should reuse it rather than declare their own.
var update = flag.Bool("update", false, "rewrite generated files (charts/polyaxon/README.md values table)")

var (
	valuesPath = filepath.Join("polyaxon", "values.yaml")
	readmePath = filepath.Join("polyaxon", "README.md")
)

func parseValuesDoc(t *testing.T) *chartdoc.Doc {
	t.Helper()
	raw, err := os.ReadFile(valuesPath)
	require.NoError(t, err)
	doc, err := chartdoc.Parse(raw)
	require.NoError(t, err, "every `## @param` path must exist in values.yaml, once")
	return doc
}

func TestReadmeValuesTable(t *testing.T) {
	doc := parseValuesDoc(t)
	raw, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	want, err := chartdoc.Splice(string(raw), doc.Markdown())
	require.NoError(t, err)

	if *update {
		require.NoError(t, os.WriteFile(readmePath, []byte(want), 0o644))
		return
	}
	if string(raw) != want {
		assert.Equal(t, want, string(raw))
		t.Fatalf("%s: the values table is out of date with values.yaml; run: go test ./charts/ -run TestReadmeValuesTable -update", readmePath)
	}
}

func TestEveryValueDocumented(t *testing.T) {
	doc := parseValuesDoc(t)
	assert.Empty(t, doc.Undocumented(), "values without a `## @param <path> <description>` line in %s", valuesPath)
	assert.NotEmpty(t, doc.Params())
}
