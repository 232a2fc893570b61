package release

import (
	"context"
	"errors"
	"strconv"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// Status is what `status` prints: the newest revision, the deployed one when it differs, and the
// profile the release was installed with.
type Status struct {
	Info
	DeployedRevision int    `json:"deployedRevision,omitempty"`
	Profile          string `json:"profile,omitempty"`
	Pending          bool   `json:"pending"`
	// Hint tells what to do when the release is not healthy (pending or failed).
	Hint string `json:"hint,omitempty"`
}

// Status returns the state of the release, or an error wrapping ErrNotInstalled.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	last, err := c.last()
	if err != nil {
		return nil, err
	}
	s := &Status{Info: infoOf(last), Pending: last.Info.Status.IsPending()}
	if d, err := c.Deployed(ctx); err == nil && d != nil {
		s.DeployedRevision = d.Version
	}
	if in, _, err := c.LoadInputs(ctx); err == nil {
		s.Profile = in.Profile
	} else if !errors.Is(err, ErrNoInputs) {
		return nil, err
	}
	switch {
	case s.Pending:
		s.Hint = "a run is in progress or crashed; if none is running: polyaxon-deploy recover"
	case last.Info.Status == helmrelease.StatusFailed && s.DeployedRevision > 0:
		s.Hint = "the last change failed; revision " + strconv.Itoa(s.DeployedRevision) + " is deployed: fix the cause and upgrade again, or polyaxon-deploy rollback"
	case last.Info.Status == helmrelease.StatusFailed:
		s.Hint = "the install failed: fix the cause and run install again, or polyaxon-deploy uninstall"
	}
	return s, nil
}

// History returns the revisions, oldest first; max > 0 keeps only the newest max.
func (c *Client) History(ctx context.Context, max int) ([]Info, error) {
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	if max > 0 && len(h) > max {
		h = h[len(h)-max:]
	}
	out := make([]Info, 0, len(h))
	for _, r := range h {
		i := infoOf(r)
		i.Notes = "" // notes belong to status, not to every history row
		out = append(out, i)
	}
	return out, nil
}
