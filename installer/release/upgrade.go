package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// UpgradeResult is the outcome of an upgrade.
type UpgradeResult struct {
	Info
	PreviousRevision int `json:"previousRevision"`
}

// Upgrade applies the chart with vals, which the caller always renders afresh from the chart,
// the profile and the user's inputs (ResetValues: nothing is reused from the old release).
// It waits for workloads and jobs. On failure it rolls back to the last good revision (unless
// WithoutRollback) and returns an *UpgradeFailedError saying so. When ctx is cancelled the new
// revision is recorded failed, never left pending-upgrade, and no rollback is attempted: the user
// asked to stop; the error says how to roll back.
func (c *Client) Upgrade(ctx context.Context, ch *chart.Chart, vals map[string]any, opts ...UpgradeOption) (*UpgradeResult, error) {
	o := buildActionOptions(opts)
	last, err := c.last()
	if err != nil {
		return nil, err
	}
	if last.Info.Status.IsPending() {
		return nil, &PendingError{Release: c.name, Namespace: c.namespace, Revision: last.Version, Status: last.Info.Status.String()}
	}
	if last.Info.Status == helmrelease.StatusUninstalled {
		return nil, fmt.Errorf("release %s/%s was uninstalled: use `polyaxon-deploy install`", c.namespace, c.name)
	}
	good, err := c.LastGood(ctx, -1)
	if err != nil {
		return nil, err
	}
	prev := last.Version
	if good != nil {
		prev = good.Version
	}

	if !o.dryRun {
		if _, err := c.ApplyCRDs(ctx, ch); err != nil {
			return nil, err
		}
	}
	up := action.NewUpgrade(c.withContext(ctx))
	up.Namespace = c.namespace
	up.Wait = true
	up.WaitForJobs = true
	up.Timeout = o.timeout
	up.ResetValues = true
	up.MaxHistory = c.maxHistory
	up.Description = o.description
	if vals == nil {
		vals = map[string]any{} // Helm copies the old values when given none
	}
	if o.dryRun {
		rel, err := c.RenderUpgrade(ctx, ch, vals)
		if err != nil {
			return nil, err
		}
		return &UpgradeResult{Info: infoOf(rel), PreviousRevision: prev}, nil
	}

	revision := last.Version + 1
	if o.inputs != nil {
		if err := c.SaveInputs(ctx, revision, *o.inputs); err != nil {
			return nil, err
		}
	}
	c.progress("upgrading release %s from revision %d to chart %s (revision %d), waiting up to %s for workloads",
		c.name, prev, chartRef(ch), revision, o.timeout)
	// Cancellation reaches Helm through the kube client's waits (see ctxKubeClient), not through
	// RunWithContext's own context: that path records the failure a second time from a
	// goroutine that outlives the call and races with whatever runs next.
	rel, err := up.RunWithContext(context.WithoutCancel(ctx), c.name, ch, vals)
	if err == nil {
		return &UpgradeResult{Info: infoOf(rel), PreviousRevision: prev}, nil
	}

	created := 0
	if cur, lerr := c.last(); lerr == nil && cur.Version > last.Version {
		created = cur.Version
	}
	if ctx.Err() != nil {
		if _, ferr := c.FailPending(context.WithoutCancel(ctx), "upgrade interrupted; marked failed by polyaxon-deploy"); ferr != nil {
			err = errors.Join(err, ferr)
		}
		hint := ""
		if good != nil {
			hint = fmt.Sprintf("revision %d is the last good one: `polyaxon-deploy rollback %d` restores it, or run the upgrade again", good.Version, good.Version)
		}
		return nil, &InterruptedError{Op: "upgrade", Release: c.name, Revision: created, Hint: hint, Err: err}
	}
	uerr := &UpgradeFailedError{Release: c.name, Revision: created, Err: err}
	if o.noRollback || good == nil || created == 0 {
		// Nothing was changed if Helm failed before recording a revision.
		return nil, uerr
	}
	c.progress("upgrade failed: %v; rolling back to revision %d", err, good.Version)
	uerr.RolledBackTo = good.Version
	if _, rerr := c.Rollback(ctx, good.Version, WithTimeout(o.timeout),
		WithDescription(fmt.Sprintf("Rollback to %d after failed upgrade (revision %d)", good.Version, created))); rerr != nil {
		uerr.RollbackErr = rerr
	}
	return nil, uerr
}

// RenderUpgrade renders the upgrade as Helm would apply it, without changing anything: a dry run
// that still reads the cluster, so the chart's lookup of generated Secrets sees the live ones
// (a client-only render would show every generated password as changed). The result carries the
// new Manifest and Config.
func (c *Client) RenderUpgrade(ctx context.Context, ch *chart.Chart, vals map[string]any) (*helmrelease.Release, error) {
	up := action.NewUpgrade(c.withContext(ctx))
	up.Namespace = c.namespace
	up.ResetValues = true
	up.DryRun = true
	up.DryRunOption = "server"
	if vals == nil {
		vals = map[string]any{}
	}
	rel, err := up.RunWithContext(ctx, c.name, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the upgrade of release %s/%s: %w", c.namespace, c.name, err)
	}
	return rel, nil
}
