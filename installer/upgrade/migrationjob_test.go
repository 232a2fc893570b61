package upgrade

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// embeddedRelease is the embedded chart with the production profile's values and sets on top.
func embeddedRelease(t *testing.T, sets ...string) (*chart.Chart, map[string]any) {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	p, err := profile.Load("production")
	require.NoError(t, err)
	vals, _, err := values.BuildFiles(p.Name, p.Values, values.Options{Values: sets})
	require.NoError(t, err)
	return ch, vals
}

func TestMigrationJobRendersTheNewVersionsJob(t *testing.T) {
	ch, vals := embeddedRelease(t, "gateway.image.tag=2.99.0-custom")
	fn, err := MigrationJob(ch, vals, render.Options{ReleaseName: "px", Namespace: "ml"})
	require.NoError(t, err)
	require.NotNil(t, fn)
	job, err := fn(context.Background())
	require.NoError(t, err)

	assert.Equal(t, migrate.JobName("px", ch.Metadata.AppVersion), job.Name, "named after the release and the target version")
	assert.Equal(t, "ml", job.Namespace)
	assert.Empty(t, job.Annotations["helm.sh/hook"], "an installer-run Job is not a Helm hook")
	require.Len(t, job.Spec.Template.Spec.Containers, 1)
	assert.True(t, strings.HasSuffix(job.Spec.Template.Spec.Containers[0].Image, ":2.99.0-custom"),
		"migrates with the new release's image, got %s", job.Spec.Template.Spec.Containers[0].Image)

	_, renderJob := values.Lookup(vals, "migrations.renderJob")
	assert.False(t, renderJob, "renderJob is set for that render only, never in the release values")
}

func TestMigrationJobNoneWithHelmHooks(t *testing.T) {
	ch, vals := embeddedRelease(t, "migrations.useHelmHooks=true")
	fn, err := MigrationJob(ch, vals, render.Options{})
	require.NoError(t, err)
	assert.Nil(t, fn, "with Helm hooks the chart migrates itself: the pipeline skips its migrate phase")
}
