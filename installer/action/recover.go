package action

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
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

// Run recovers; a release that is not pending and has no Deployment left scaled down is left
// alone (Action "none").
func (a *Recover) Run(ctx context.Context) (*release.RecoverResult, error) {
	rc := a.Release
	pending, err := rc.Pending(ctx)
	if err != nil {
		return nil, err
	}
	names, err := rc.Names(ctx)
	if err != nil {
		return nil, err
	}
	scaler := &backup.ReleaseScaler{Client: rc.Kube(), Namespace: rc.Namespace(), Names: names}
	res := &release.RecoverResult{Release: rc.Name(), Action: "none"}
	scaleBack := step("scale back what a restore left scaled down", func(ctx context.Context) (err error) {
		res.ScaledBack, err = scaler.ScaleBack(ctx)
		return err
	})
	restoreGuards := step("put back the run guards of the deployed revision", func(ctx context.Context) (err error) {
		res.RestoredGuards, err = restoreGuards(ctx, rc)
		return err
	})
	if pending == nil {
		if err := a.run(ctx, a.lock(rc.Lock(), rc), scaleBack, restoreGuards); err != nil {
			return nil, err
		}
		if len(res.ScaledBack)+len(res.RestoredGuards) == 0 {
			a.progress().OK(fmt.Sprintf("release %s is not pending, no restore left it scaled down and its run guards are in place: nothing to recover", rc.Name()))
			return res, nil
		}
		res.Action = "scaled-back"
		if len(res.RestoredGuards) > 0 {
			res.Action = "repaired"
			a.progress().OK(fmt.Sprintf("run guards put back as the deployed revision has them: %s", strings.Join(res.RestoredGuards, ", ")))
		}
		if len(res.ScaledBack) > 0 {
			a.progress().OK(fmt.Sprintf("Deployments an interrupted restore left at 0 replicas scaled back: %s", strings.Join(res.ScaledBack, ", ")))
		}
		return res, nil
	}
	since := pending.Info.LastDeployed.Time
	q := fmt.Sprintf("Release %s revision %d has been %s since %s (%s ago). Mark it failed and roll back? Only do this if no other polyaxon-deploy or helm process is working on it",
		rc.Name(), pending.Version, pending.Info.Status, since.Format(time.RFC3339), time.Since(since).Round(time.Second))
	if err := a.confirm(a.Yes, q, "recover"); err != nil {
		return nil, err
	}
	err = a.run(ctx, a.lock(rc.Lock(), rc), step("recover", func(ctx context.Context) error {
		r, err := rc.Recover(ctx, release.WithTimeout(TimeoutOf(a.Timeout, nil)),
			release.WithRevisionPodSecurity(RevisionPodSecurity(rc, a.progress())))
		if r != nil {
			res = r
		}
		return err
	}), scaleBack)
	if err != nil {
		return nil, err
	}
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

// restoreGuards puts back the deployed revision's run guards that are missing or changed, and
// names them.
func restoreGuards(ctx context.Context, rc *release.Client) ([]string, error) {
	rev, err := rc.Deployed(ctx)
	if err != nil || rev == nil {
		return nil, err
	}
	rendered, err := render.Released(rev)
	if err != nil {
		return nil, err
	}
	want := guards.Of(rendered)
	if len(want) == 0 {
		return nil, nil
	}
	getter := rc.Configuration().RESTClientGetter
	if getter == nil {
		return nil, fmt.Errorf("release %s: no cluster to restore its run guards in", rc.Name())
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	g := guards.Client{Dynamic: dyn, Mapper: mapper, FieldManager: "polyaxon-deploy"}
	drifts, err := g.Compare(ctx, want)
	if err != nil || len(drifts) == 0 {
		return nil, err
	}
	names := make([]string, len(drifts))
	for i, d := range drifts {
		names[i] = d.String()
	}
	return names, g.Restore(ctx, drifts, rc.Name(), rc.Namespace())
}
