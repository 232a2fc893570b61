package upgrade

import (
	"context"
	"fmt"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	"helm.sh/helm/v3/pkg/chart"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// migrationJobTemplate is the chart's migration Job, rendered only with migrations.renderJob.
const migrationJobTemplate = "templates/migrations/job.yaml"

// MigrationJob returns the migration Job part of an Action for the new release: it renders
// the chart's migration Job alone, with migrations.renderJob=true for that render only (never
// in the release's values). nil when the chart runs migrations as Helm hooks: then the
// installer runs no Job itself. opts name the release and namespace; the render is an
// upgrade's.
func MigrationJob(ch *chart.Chart, vals map[string]any, opts render.Options) (MigrationJobs, error) {
	merged, err := render.MergedValues(ch, vals)
	if err != nil {
		return nil, err
	}
	typed, err := chartvalues.Of(merged)
	if err != nil {
		return nil, err
	}
	if typed.Migrations.UseHelmHooks {
		return nil, nil
	}
	opts.IsUpgrade = true
	return func(ctx context.Context) (*batchv1.Job, error) {
		withJob := values.Merge(values.DeepCopy(vals), map[string]any{"migrations": map[string]any{"renderJob": true}})
		mfs, err := render.RenderTemplate(ch, withJob, opts, migrationJobTemplate)
		if err != nil {
			return nil, err
		}
		if len(mfs) != 1 {
			return nil, fmt.Errorf("%s rendered %d objects with migrations.renderJob=true, want 1", migrationJobTemplate, len(mfs))
		}
		return migrate.DecodeJob([]byte(mfs[0].Content))
	}, nil
}
