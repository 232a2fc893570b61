package polyaxonversion_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
)

func TestOfPrefersTheValue(t *testing.T) {
	md := &chart.Metadata{Version: "2.18.0", AppVersion: "2.18.0"}
	assert.Equal(t, "2.18.0", polyaxonversion.Of(md, nil))
	assert.Equal(t, "2.18.0", polyaxonversion.Of(md, map[string]any{"polyaxon": map[string]any{"version": ""}}))
	assert.Equal(t, "2.15.1", polyaxonversion.Of(md, map[string]any{"polyaxon": map[string]any{"version": "2.15.1"}}))
	d := polyaxonversion.Deployed(md, map[string]any{"polyaxon": map[string]any{"version": "2.15.1"}})
	assert.Equal(t, "2.15.1", d.AppVersion)
	assert.Equal(t, "2.18.0", md.AppVersion, "the chart's metadata is not changed")
}

func TestSupportsTheAnnotatedRange(t *testing.T) {
	md := &chart.Metadata{Version: "2.18.0", AppVersion: "2.18.0", Annotations: map[string]string{polyaxonversion.RangeAnnotation: ">=2.15.0, <2.19.0"}}
	for v, want := range map[string]bool{"2.15.0": true, "2.15.1": true, "2.18.0": true, "2.18.9": true, "2.14.1": false, "2.19.0": false, "3.0.0": false} {
		got, err := polyaxonversion.Supports(md, v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	_, err := polyaxonversion.Supports(md, "latest")
	assert.Error(t, err, "a tag that is no version")

	bare := &chart.Metadata{Version: "2.18.0", AppVersion: "2.18.0"}
	ok, err := polyaxonversion.Supports(bare, "2.18.0")
	require.NoError(t, err)
	assert.True(t, ok, "without the annotation: its appVersion")
	ok, err = polyaxonversion.Supports(bare, "2.15.1")
	require.NoError(t, err)
	assert.False(t, ok, "without the annotation: nothing else")

	broken := &chart.Metadata{Version: "2.18.0", Annotations: map[string]string{polyaxonversion.RangeAnnotation: ">=two"}}
	_, err = polyaxonversion.Supports(broken, "2.15.1")
	assert.ErrorContains(t, err, polyaxonversion.RangeAnnotation)
}
