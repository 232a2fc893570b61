package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// RecoverResult says what Recover did.
type RecoverResult struct {
	Release string `json:"release"`
	// Action: "none" (nothing pending), "rolled-back", "uninstalled", "scaled-back" (only
	// Deployments an interrupted restore left scaled down were brought back), or "repaired"
	// (scaled back and/or run guards restored).
	Action          string `json:"action"`
	PendingRevision int    `json:"pendingRevision,omitempty"`
	PendingStatus   string `json:"pendingStatus,omitempty"`
	RolledBackTo    int    `json:"rolledBackTo,omitempty"`
	Revision        int    `json:"revision,omitempty"`
	// ScaledBack: "Deployment: replicas" for each Deployment brought back to the replicas an
	// interrupted restore recorded.
	ScaledBack []string `json:"scaledBack,omitempty"`
	// RestoredGuards: the run guards (installer/guards) put back as the deployed revision has
	// them, each "Kind name missing|changed".
	RestoredGuards []string `json:"restoredGuards,omitempty"`
}

// Pending returns the newest revision when it is pending-*, else nil (for the confirmation prompt).
func (c *Client) Pending(ctx context.Context) (*helmrelease.Release, error) {
	last, err := c.last()
	if errors.Is(err, ErrNotInstalled) {
		return nil, nil
	}
	if err != nil || !last.Info.Status.IsPending() {
		return nil, err
	}
	return last, nil
}

// Recover repairs a release left pending-install|pending-upgrade|pending-rollback by a crashed
// run: it marks the pending revision failed in Helm's storage, then rolls back to the last good
// revision (labelling the namespace for it, WithRevisionPodSecurity); a pending install with no good
// revision is uninstalled (volumes kept). The caller holds the release lock, so no polyaxon-deploy run can own the pending revision; it confirms
// with the user because a plain helm process might.
func (c *Client) Recover(ctx context.Context, opts ...RecoverOption) (*RecoverResult, error) {
	o := buildActionOptions(opts)
	res := &RecoverResult{Release: c.name, Action: "none"}
	pending, err := c.Pending(ctx)
	if err != nil || pending == nil {
		return res, err
	}
	res.PendingRevision = pending.Version
	res.PendingStatus = pending.Info.Status.String()
	if o.dryRun {
		return res, nil
	}
	if err := c.markFailed(pending, fmt.Sprintf("%s left by an interrupted run; marked failed by polyaxon-deploy recover", pending.Info.Status)); err != nil {
		return res, err
	}
	c.progress("revision %d was %s: marked failed", pending.Version, res.PendingStatus)

	good, err := c.LastGood(ctx, pending.Version)
	if err != nil {
		return res, err
	}
	if good == nil {
		// Only a pending install (or failures) ever existed: nothing to go back to.
		un := action.NewUninstall(c.withContext(ctx))
		un.Wait = true
		un.Timeout = o.timeout
		un.Description = "interrupted install removed by polyaxon-deploy recover"
		c.progress("no good revision to roll back to: uninstalling the interrupted install (volumes are kept)")
		if _, err := un.Run(c.name); err != nil {
			return res, fmt.Errorf("uninstalling interrupted install of release %s/%s: %w", c.namespace, c.name, err)
		}
		if err := c.deleteInputs(ctx); err != nil {
			return res, err
		}
		res.Action = "uninstalled"
		return res, nil
	}
	info, err := c.Rollback(ctx, good.Version, WithTimeout(o.timeout), WithRevisionPodSecurity(o.revisionPodSecurity),
		WithDescription(fmt.Sprintf("Rollback to %d by recover (revision %d was %s)", good.Version, pending.Version, res.PendingStatus)))
	if err != nil {
		return res, err
	}
	res.Action = "rolled-back"
	res.RolledBackTo = good.Version
	res.Revision = info.Revision
	return res, nil
}
