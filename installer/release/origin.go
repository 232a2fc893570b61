package release

import (
	"context"
	"errors"
	"fmt"
)

// Origin says whether polyaxon-deploy made the deployed revision. Every revision it makes has
// its inputs stored under its own number; a revision without an entry was made by something
// else that drives Helm (helm upgrade, Argo CD, Flux), and an upgrade that replays the stored
// inputs would revert what that revision changed.
type Origin struct {
	// Revision is the deployed revision (the newest one when none is deployed).
	Revision int
	// InputsRevision is the revision whose stored inputs an upgrade replays (0: none stored).
	InputsRevision int
	// Inputs are the inputs stored with InputsRevision.
	Inputs Inputs
	// Values are the user-supplied values of Revision, as `helm get values` shows them.
	Values map[string]any
}

// Outside reports a deployed revision that polyaxon-deploy did not make.
func (o Origin) Outside() bool { return o.InputsRevision != o.Revision }

// String says who made the revision, for messages.
func (o Origin) String() string {
	switch {
	case !o.Outside():
		return fmt.Sprintf("revision %d was made by polyaxon-deploy", o.Revision)
	case o.InputsRevision == 0:
		return fmt.Sprintf("revision %d was made outside polyaxon-deploy (helm, a GitOps tool): no inputs are stored for the release", o.Revision)
	default:
		return fmt.Sprintf("revision %d was made outside polyaxon-deploy (helm, a GitOps tool): the newest stored inputs are revision %d's", o.Revision, o.InputsRevision)
	}
}

// Origin reads who made the deployed revision (of the newest one when none is deployed), with
// the inputs an upgrade would replay. An error wraps ErrNotInstalled when there is no release.
func (c *Client) Origin(ctx context.Context) (Origin, error) {
	r, err := c.Deployed(ctx)
	if err != nil {
		return Origin{}, err
	}
	if r == nil {
		if r, err = c.last(); err != nil {
			return Origin{}, err
		}
	}
	o := Origin{Revision: r.Version, Values: r.Config}
	o.Inputs, o.InputsRevision, err = c.InputsFor(ctx, r.Version)
	if err != nil && !errors.Is(err, ErrNoInputs) {
		return Origin{}, err
	}
	return o, nil
}
