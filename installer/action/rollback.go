package action

import (
	"context"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// Rollback re-applies an earlier revision with wait, under the release's lock, and labels the
// namespace with that revision's Pod Security (RevisionPodSecurity). The database is not rolled
// back.
type Rollback struct {
	Env
	Release *release.Client
	// Revision to go back to (0: the last good one before the current).
	Revision int
	Timeout  time.Duration
}

// rollbackRun is one rollback's state, which its phases share (as installRun).
type rollbackRun struct {
	a    *Rollback
	rc   *release.Client
	info *release.Info
}

// Run rolls back and returns the new revision.
func (a *Rollback) Run(ctx context.Context) (*release.Info, error) {
	r := &rollbackRun{a: a, rc: a.Release}
	if err := a.run(ctx, r.phases()...); err != nil {
		return nil, err
	}
	info := r.info
	a.recordRevision(ctx, r.rc, nil)
	a.progress().OK(fmt.Sprintf("Release %s rolled back: revision %d runs chart %s (Polyaxon %s)", info.Name, info.Revision, info.ChartVersion, info.AppVersion))
	a.progress().Warn("the database was not rolled back: if the newer version migrated it, restore the backup taken before that upgrade (polyaxon-deploy restore DIR)")
	return info, nil
}

// phases: who made the replaced revision, the lock, the rollback.
func (r *rollbackRun) phases() []phase.Phase {
	return []phase.Phase{step("origin", r.origin), r.a.lock(r.rc.Lock(), r.rc), step("rollback", r.rollback)}
}

// origin says whose the replaced revision is when helm or a GitOps tool made it: it is
// replaced like any other. A revision that cannot be read is the rollback's to report.
func (r *rollbackRun) origin(ctx context.Context) error {
	if origin, err := r.rc.Origin(ctx); err == nil && origin.Outside() {
		r.a.progress().Warn(origin.String() + "; the rollback replaces it (its values stay in Helm's history)")
	}
	return nil
}

func (r *rollbackRun) rollback(ctx context.Context) (err error) {
	r.info, err = r.rc.Rollback(ctx, r.a.Revision, release.WithTimeout(TimeoutOf(r.a.Timeout, nil)),
		release.WithRevisionPodSecurity(RevisionPodSecurity(r.rc, r.a.progress())))
	return err
}
