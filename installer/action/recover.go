package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// Recover repairs a release left pending-install|upgrade|rollback by a crashed run, under the
// release's lock, after confirmation (unless Yes): no other process may be working on it. The
// namespace gets the Pod Security of the revision it rolls back to (RevisionPodSecurity). It
// also brings back the Deployments an interrupted restore left scaled down (the replicas the
// restore recorded on each): the lock says no restore is running.
type Recover struct {
	Env
	Release *release.Client
	Yes     bool
	Timeout time.Duration
}

// recoverRun is one recovery's state, which its phases share (as installRun).
type recoverRun struct {
	a       *Recover
	rc      *release.Client
	pending *helmrelease.Release
	scaler  *backup.ReleaseScaler
	res     *release.RecoverResult
	// extras are objects beside the run guards that widen access: recover leaves them.
	extras []guards.Extra
}

// Run recovers; a release that is not pending and has no Deployment left scaled down is left
// alone (Action "none").
func (a *Recover) Run(ctx context.Context) (*release.RecoverResult, error) {
	r := &recoverRun{a: a, rc: a.Release}
	if err := a.run(ctx, r.phases()...); err != nil {
		return nil, err
	}
	// The deployed revision's guards, stored afresh: a revision made since by plain helm, or
	// the one a rollback left, is what the exporter then compares.
	a.recordRevision(ctx, r.rc, nil)
	if r.pending == nil {
		return r.repaired(), nil
	}
	res := r.res
	switch res.Action {
	case "rolled-back":
		a.progress().OK(fmt.Sprintf("revision %d (%s) marked failed; rolled back to revision %d (now revision %d)", res.PendingRevision, res.PendingStatus, res.RolledBackTo, res.Revision))
	case "uninstalled":
		a.progress().OK(fmt.Sprintf("revision %d (%s) marked failed; the interrupted install was uninstalled (volumes kept)", res.PendingRevision, res.PendingStatus))
	}
	if len(res.ScaledBack) > 0 {
		a.progress().OK(fmt.Sprintf("Deployments an interrupted restore left at 0 replicas scaled back: %s", strings.Join(res.ScaledBack, ", ")))
	}
	return res, nil
}

// phases: inspect, confirm (a pending revision), the lock, recover the pending revision,
// scale back what a restore left scaled down, and (nothing pending) put back the run guards.
func (r *recoverRun) phases() []phase.Phase {
	noPending := func() (bool, string) { return r.pending == nil, "no pending revision" }
	pending := func() (bool, string) { return r.pending != nil, "a pending revision is rolled back instead" }
	return []phase.Phase{
		step("inspect", r.inspect),
		&phase.Func{Name: "confirm", Do: r.confirm, SkipIf: noPending},
		r.a.lock(r.rc.Lock(), r.rc),
		&phase.Func{Name: "recover", Do: r.recover, SkipIf: noPending},
		step("scale back what a restore left scaled down", r.scaleBack),
		&phase.Func{Name: "put back the run guards of the deployed revision", Do: r.restoreGuards, SkipIf: pending},
	}
}

// inspect reads the pending revision, if any, and the release's objects.
func (r *recoverRun) inspect(ctx context.Context) (err error) {
	if r.pending, err = r.rc.Pending(ctx); err != nil {
		return err
	}
	names, err := r.rc.Names(ctx)
	if err != nil {
		return err
	}
	r.scaler = &backup.ReleaseScaler{Client: r.rc.Kube(), Namespace: r.rc.Namespace(), Names: names}
	r.res = &release.RecoverResult{Release: r.rc.Name(), Action: "none"}
	return nil
}

// confirm asks before the pending revision is marked failed: no other process may be working
// on it.
func (r *recoverRun) confirm(context.Context) error {
	since := r.pending.Info.LastDeployed.Time
	q := fmt.Sprintf("Release %s revision %d has been %s since %s (%s ago). Mark it failed and roll back? Only do this if no other polyaxon-deploy or helm process is working on it",
		r.rc.Name(), r.pending.Version, r.pending.Info.Status, since.Format(time.RFC3339), time.Since(since).Round(time.Second))
	return r.a.confirm(r.a.Yes, q, "recover")
}

func (r *recoverRun) recover(ctx context.Context) error {
	res, err := r.rc.Recover(ctx, release.WithTimeout(TimeoutOf(r.a.Timeout, nil)),
		release.WithRevisionPodSecurity(RevisionPodSecurity(r.rc, r.a.progress())))
	if res != nil {
		r.res = res
	}
	return err
}

func (r *recoverRun) scaleBack(ctx context.Context) (err error) {
	r.res.ScaledBack, err = r.scaler.ScaleBack(ctx)
	return err
}

func (r *recoverRun) restoreGuards(ctx context.Context) (err error) {
	r.res.RestoredGuards, r.extras, err = restoreGuards(ctx, r.rc)
	return err
}

// repaired says what a recovery with nothing pending did, and which objects beside the run
// guards it left.
func (r *recoverRun) repaired() *release.RecoverResult {
	res, p := r.res, r.a.progress()
	defer r.reportExtras()
	if len(res.ScaledBack)+len(res.RestoredGuards) == 0 {
		p.OK(fmt.Sprintf("release %s is not pending, no restore left it scaled down and its run guards are in place: nothing to recover", r.rc.Name()))
		return res
	}
	res.Action = "scaled-back"
	if len(res.RestoredGuards) > 0 {
		res.Action = "repaired"
		p.OK(fmt.Sprintf("run guards put back as the deployed revision has them: %s", strings.Join(res.RestoredGuards, ", ")))
	}
	if len(res.ScaledBack) > 0 {
		p.OK(fmt.Sprintf("Deployments an interrupted restore left at 0 replicas scaled back: %s", strings.Join(res.ScaledBack, ", ")))
	}
	return res
}

// reportExtras names the objects beside the run guards that widen access: recover deletes
// nothing, as only the user knows whether something of theirs needs one.
func (r *recoverRun) reportExtras() {
	if len(r.extras) == 0 {
		return
	}
	left := make([]string, len(r.extras))
	for i, x := range r.extras {
		left[i] = x.String() + " (" + x.Delete() + ")"
	}
	r.a.progress().Warn(fmt.Sprintf("left in place, as recover deletes nothing: %s; delete them unless something of yours needs them", strings.Join(left, "; ")))
}

// restoreGuards puts back the deployed revision's run guards that are missing or changed, and
// names them; it deletes nothing, and returns the objects beside them that widen access
// (guards.Client.Extra) for the user to delete.
func restoreGuards(ctx context.Context, rc *release.Client) ([]string, []guards.Extra, error) {
	want, _, err := deployedRevisionGuards(ctx, rc)
	if err != nil || want == nil {
		return nil, nil, err
	}
	if len(want.Objects) == 0 {
		return nil, nil, nil
	}
	getter := rc.Configuration().RESTClientGetter
	if getter == nil {
		return nil, nil, fmt.Errorf("release %s: no cluster to restore its run guards in", rc.Name())
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return nil, nil, err
	}
	g := guards.Client{Dynamic: dyn, Mapper: mapper, FieldManager: "polyaxon-deploy"}
	drifts, err := g.Compare(ctx, want.Objects)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(drifts))
	for i, d := range drifts {
		names[i] = d.String()
	}
	// The revision's guards first: a user who may not list every binding still gets them back.
	restored := g.Restore(ctx, drifts, rc.Name(), rc.Namespace())
	extras, err := g.Extra(ctx, *want)
	return names, extras, errors.Join(restored, err)
}
