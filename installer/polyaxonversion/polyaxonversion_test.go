package polyaxonversion_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
