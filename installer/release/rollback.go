package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// RollbackTarget returns the revision Rollback(ctx, 0) would restore: the newest good revision
// other than the one currently deployed (when the newest revision failed, the deployed one).
func (c *Client) RollbackTarget(ctx context.Context) (*helmrelease.Release, error) {
	last, err := c.last()
	if err != nil {
		return nil, err
	}
	exclude := -1
	if last.Info.Status == helmrelease.StatusDeployed {
		exclude = last.Version
	}
	good, err := c.LastGood(ctx, exclude)
	if err != nil {
		return nil, err
	}
	if good == nil {
		return nil, fmt.Errorf("release %s/%s has no earlier good revision to roll back to (see `polyaxon-deploy history`)", c.namespace, c.name)
	}
	return good, nil
}

// Rollback re-applies revision (0: RollbackTarget) as a new revision, with wait, and stores
// the inputs of that revision with the new one so that the next upgrade starts from them (a
// revision made outside polyaxon-deploy has none: the new one has none either).
// WithRevisionPodSecurity labels the namespace for that revision.
// The database is not rolled back: a revision whose migrations ran stays migrated (restore a
// backup for that).
func (c *Client) Rollback(ctx context.Context, revision int, opts ...RollbackOption) (*Info, error) {
	o := buildActionOptions(opts)
	last, err := c.last()
	if err != nil {
		return nil, err
	}
	if last.Info.Status.IsPending() {
		return nil, &PendingError{Release: c.name, Namespace: c.namespace, Revision: last.Version, Status: last.Info.Status.String()}
	}
	var target *helmrelease.Release
	if revision == 0 {
		if target, err = c.RollbackTarget(ctx); err != nil {
			return nil, err
		}
	} else {
		if target, err = c.cfg.Releases.Get(c.name, revision); err != nil {
			return nil, fmt.Errorf("release %s/%s has no revision %d (see `polyaxon-deploy history`): %w", c.namespace, c.name, revision, err)
		}
	}
	if target.Info.Status == helmrelease.StatusFailed {
		c.progress("warning: revision %d failed when it was applied; rolling back to it anyway", target.Version)
	}

	rb := action.NewRollback(c.withContext(ctx))
	rb.Version = target.Version
	rb.Wait = true
	rb.WaitForJobs = true
	rb.Timeout = o.timeout
	rb.MaxHistory = c.maxHistory
	rb.DryRun = o.dryRun
	if o.dryRun {
		if err := rb.Run(c.name); err != nil {
			return nil, fmt.Errorf("dry-run rollback of release %s/%s to revision %d: %w", c.namespace, c.name, target.Version, err)
		}
		info := infoOf(target)
		return &info, nil
	}

	newRev := last.Version + 1
	// Only the target's own inputs describe it: an older entry would make the new revision look
	// like polyaxon-deploy's, and the next upgrade would silently revert what the target changed.
	switch in, n, ierr := c.InputsFor(ctx, target.Version); {
	case ierr == nil && n == target.Version:
		if err := c.SaveInputs(ctx, newRev, in); err != nil {
			return nil, err
		}
	case ierr == nil || errors.Is(ierr, ErrNoInputs):
		c.progress("warning: revision %d was made outside polyaxon-deploy (helm, a GitOps tool): no inputs are stored for it, nor for revision %d; "+
			"the next upgrade lists the values it would change (--keep-release-values keeps them)", target.Version, newRev)
	default:
		return nil, ierr
	}

	var ps *PodSecurity
	if o.revisionPodSecurity != nil {
		p, err := o.revisionPodSecurity(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("the Pod Security labels of revision %d: %w", target.Version, err)
		}
		if _, err := c.LowerEnforce(ctx, p); err != nil {
			return nil, err
		}
		ps = &p
	}

	c.progress("rolling back release %s to revision %d (chart %s) as revision %d", c.name, target.Version, chartRef(target.Chart), newRev)
	if err := c.recreateChangedStatefulSets(ctx, last.Manifest, target.Manifest, o.timeout); err != nil {
		return nil, err
	}
	err = rb.Run(c.name)
	if err == nil && o.description != "" {
		if r, gerr := c.cfg.Releases.Get(c.name, newRev); gerr == nil {
			r.Info.Description = o.description
			_ = c.cfg.Releases.Update(r)
		}
	}
	if err != nil {
		if _, ferr := c.FailPending(context.WithoutCancel(ctx), "rollback did not finish; marked failed by polyaxon-deploy"); ferr != nil {
			err = errors.Join(err, ferr)
		}
		if ctx.Err() != nil {
			return nil, &InterruptedError{Op: "rollback", Release: c.name, Revision: newRev, Err: err,
				Hint: fmt.Sprintf("run `polyaxon-deploy rollback %d` again", target.Version)}
		}
		return nil, fmt.Errorf("rollback of release %s/%s to revision %d: %w", c.namespace, c.name, target.Version, err)
	}
	if ps != nil {
		if _, err := c.EnsureNamespace(ctx, *ps); err != nil {
			return nil, fmt.Errorf("rolled back to revision %d, but the namespace's Pod Security labels: %w", target.Version, err)
		}
	}
	r, err := c.cfg.Releases.Get(c.name, newRev)
	if err != nil {
		return nil, fmt.Errorf("reading revision %d of release %s/%s: %w", newRev, c.namespace, c.name, err)
	}
	info := infoOf(r)
	return &info, nil
}
