package action

import (
	"context"
	"fmt"
	"time"

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

// Run rolls back and returns the new revision.
func (a *Rollback) Run(ctx context.Context) (*release.Info, error) {
	rc := a.Release
	// A revision made by helm or a GitOps tool is replaced like any other: say whose it was.
	if origin, err := rc.Origin(ctx); err == nil && origin.Outside() {
		a.progress().Warn(origin.String() + "; the rollback replaces it (its values stay in Helm's history)")
	}
	var info *release.Info
	err := a.run(ctx, a.lock(rc.Lock(), rc), step("rollback", func(ctx context.Context) (err error) {
		info, err = rc.Rollback(ctx, a.Revision, release.WithTimeout(TimeoutOf(a.Timeout, nil)),
			release.WithRevisionPodSecurity(RevisionPodSecurity(rc, a.progress())))
		return err
	}))
	if err != nil {
		return nil, err
	}
	a.progress().OK(fmt.Sprintf("Release %s rolled back: revision %d runs chart %s (Polyaxon %s)", info.Name, info.Revision, info.ChartVersion, info.AppVersion))
	a.progress().Warn("the database was not rolled back: if the newer version migrated it, restore the backup taken before that upgrade (polyaxon-deploy restore DIR)")
	return info, nil
}
