package upgrade

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
)

// Action is the one seam through which a pipeline (this package's upgrade, installer/adopt's
// adoption) asks the command that runs it about the release it installs: the checks before
// anything changes and after the release serves, and the new version's migration Job.
// installer/action implements it for each run; a nil Action runs no checks and no migration
// Job. What the pipeline installs (Options.Chart and Values) and where its database is
// (Backuper) are given as values.
type Action interface {
	// Checks runs the release's checks: before anything changes (pre), or once the new
	// release serves. A failure stops the pipeline (the phases done are undone).
	Checks(ctx context.Context, pre bool) error
	// RunsMigrationJob is false when the chart runs its migrations itself (Helm hooks): the
	// migrate phase is then skipped.
	RunsMigrationJob() bool
	// MigrationJob renders the new version's migration Job, which Options.Migrator runs.
	MigrationJob(ctx context.Context) (*batchv1.Job, error)
}

// MigrationJobs is the migration Job part of an Action: the renderer MigrationJob returns
// (nil when the chart runs its migrations itself).
type MigrationJobs func(context.Context) (*batchv1.Job, error)

// RunsMigrationJob is Action's.
func (m MigrationJobs) RunsMigrationJob() bool { return m != nil }

// MigrationJob is Action's.
func (m MigrationJobs) MigrationJob(ctx context.Context) (*batchv1.Job, error) { return m(ctx) }
