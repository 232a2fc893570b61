package chartdoc_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartdoc"
)

const values = `# plain comment, not part of any section
## @section First
## Text of the first section,
## on two lines.

## @param name Object name | with a pipe.
name: ""
svc:
  ## @param svc.port Port.
  port: 80
  ## @param svc.nodePort Node port.
  nodePort: null
## @param resources Container resources.
resources:
  requests: {cpu: 100m}

## @section Second
## @param tags.a A tag that YAML would read as a number.
## @param tags.b A plain tag.
tags:
  a: "16.4"
  b: latest
undocumented:
  leaf: 1
  nested: {deep: true}
  emptyMap: {}
`

func TestParse(t *testing.T) {
	doc, err := chartdoc.Parse([]byte(values))
	require.NoError(t, err)
	require.Len(t, doc.Sections, 2)
	assert.Equal(t, "First", doc.Sections[0].Name)
	assert.Equal(t, "Text of the first section, on two lines.", doc.Sections[0].Description)
	assert.Empty(t, doc.Sections[1].Description)

	var paths []string
	for _, p := range doc.Params() {
		paths = append(paths, p.Path)
	}
	assert.Equal(t, []string{"name", "svc.port", "svc.nodePort", "resources", "tags.a", "tags.b"}, paths)
	assert.Equal(t, map[string]any{"requests": map[string]any{"cpu": "100m"}}, doc.Params()[3].Default)
}

func TestUndocumented(t *testing.T) {
	doc, err := chartdoc.Parse([]byte(values))
	require.NoError(t, err)
	// resources has content but is documented itself; undocumented.* are not.
	assert.Equal(t, []string{"undocumented.emptyMap", "undocumented.leaf", "undocumented.nested.deep"}, doc.Undocumented())
}

func TestParseErrors(t *testing.T) {
	_, err := chartdoc.Parse([]byte("## @param svc.prot Typo.\nsvc:\n  port: 1\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1: @param svc.prot: no such value")

	_, err = chartdoc.Parse([]byte("## @param a A.\n## @param a Again.\na: 1\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2: @param a already documented on line 1")
}

func TestMarkdown(t *testing.T) {
	doc, err := chartdoc.Parse([]byte(values))
	require.NoError(t, err)
	md := doc.Markdown()
	for _, want := range []string{
		"### First\n\nText of the first section, on two lines.\n\n| Name | Description | Default |\n",
		"| `name` | Object name \\| with a pipe. | `\"\"` |\n",
		"| `svc.port` | Port. | `80` |\n",
		"| `svc.nodePort` | Node port. | `null` |\n",
		"| `resources` | Container resources. | `{\"requests\":{\"cpu\":\"100m\"}}` |\n",
		"\n### Second\n\n| Name",
		"| `tags.a` | A tag that YAML would read as a number. | `\"16.4\"` |\n",
		"| `tags.b` | A plain tag. | `latest` |\n",
	} {
		assert.Contains(t, md, want)
	}
}

func TestFormatDefault(t *testing.T) {
	for in, want := range map[any]string{
		"":          "`\"\"`",
		"true":      "`\"true\"`",
		"16":        "`\"16\"`",
		"a: b":      "`\"a: b\"`",
		"/":         "`/`",
		"8Gi":       "`8Gi`",
		true:        "`true`",
		float64(80): "`80`",
		"<a>&":      "`<a>&`",
	} {
		assert.Equal(t, want, chartdoc.FormatDefault(in), "%#v", in)
	}
	assert.Equal(t, "`[\"ReadWriteOnce\"]`", chartdoc.FormatDefault([]any{"ReadWriteOnce"}))
}

func TestSplice(t *testing.T) {
	readme := "intro\n" + chartdoc.StartMarker + "\nold\n" + chartdoc.EndMarker + "\nafter\n"
	got, err := chartdoc.Splice(readme, "new\n")
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+chartdoc.StartMarker+"\nnew\n"+chartdoc.EndMarker+"\nafter\n", got)

	_, err = chartdoc.Splice("no markers", "x")
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), chartdoc.StartMarker))
}
