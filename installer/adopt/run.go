package adopt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// lock takes our release's lock (its Lease lives in our namespace, created first when it is
// not the old release's). A lost lease cancels the run.
func (a *adoption) lock(ctx context.Context, cancel context.CancelCauseFunc) error {
	ours := a.o.Ours
	if ours.Namespace() != a.o.Old.Namespace() {
		if _, err := ours.EnsureNamespace(ctx, a.o.PodSecurity); err != nil {
			return err
		}
	}
	held, err := ours.Lock().Acquire(ctx)
	if err != nil {
		return err
	}
	a.held = held
	go func() {
		select {
		case <-held.Lost():
			cancel(release.ErrLockLost)
		case <-ctx.Done():
		}
	}()
	if a.o.AfterPhase != nil {
		a.o.AfterPhase(PhaseLock)
	}
	return nil
}

func (a *adoption) unlock(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := a.o.Ours.FailPending(cctx, "adopt interrupted; marked failed by polyaxon-deploy"); err != nil {
		a.printf("warning: %v", err)
	}
	if err := a.held.Release(cctx); err != nil {
		a.printf("warning: %v", err)
	}
}

// removeOld uninstalls the old release, once its CRDs are ours: the uninstall must not find
// them in its manifest. Its volumes stay unless PurgeOldData.
func (a *adoption) removeOld(ctx context.Context) error {
	if still, err := a.crdsInOldManifests(); err != nil {
		return err
	} else if len(still) > 0 {
		return fmt.Errorf("refusing to uninstall release %s/%s: revisions %v still list the CRDs, and Helm would delete them with every run", a.old.Namespace, a.old.Name, still)
	}
	if owned, err := a.crds.ownedByOld(ctx, a.rec.CRDs); err != nil {
		return err
	} else if len(owned) > 0 {
		return fmt.Errorf("refusing to uninstall release %s/%s: CRDs %s still carry its ownership", a.old.Namespace, a.old.Name, strings.Join(owned, ", "))
	}
	claims, err := a.wl.claimsOf(ctx, a.old.Stateful)
	if err != nil {
		return err
	}
	if _, err := a.o.Old.Uninstall(ctx, release.WithTimeout(a.o.Timeout), release.WithDescription("replaced by "+a.o.Ours.Name()+" (polyaxon-deploy adopt)")); err != nil && !errors.Is(err, release.ErrNotInstalled) {
		return err
	}
	for _, name := range a.rec.CRDs {
		if _, err := a.o.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("CRD %s after uninstalling the old release: %w", name, err)
		}
	}
	a.res.OldRemoved = true
	if a.o.PurgeOldData {
		for _, c := range claims {
			err := a.o.Kube.CoreV1().PersistentVolumeClaims(a.old.Namespace).Delete(ctx, c, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting PersistentVolumeClaim %s/%s: %w", a.old.Namespace, c, err)
			}
			a.res.PurgedVolumes = append(a.res.PurgedVolumes, c)
		}
	} else {
		a.res.OldVolumes = claims
	}
	if a.o.Ours.Namespace() == a.old.Namespace {
		// The old pods are gone for good: the namespace takes the profile's Pod Security.
		if _, err := a.o.Ours.EnsureNamespace(ctx, a.o.PodSecurity); err != nil {
			return err
		}
	}
	a.printf("release %s/%s uninstalled; the CRDs %s and their objects are kept", a.old.Namespace, a.old.Name, strings.Join(a.rec.CRDs, ", "))
	if len(a.res.OldVolumes) > 0 {
		a.printf("its volumes are kept: %s (delete them with --purge-old-data, or kubectl delete pvc)", strings.Join(a.res.OldVolumes, ", "))
	}
	return nil
}

// crdsInOldManifests lists the revisions of the old release whose manifest still lists a
// polyaxon.com CRD.
func (a *adoption) crdsInOldManifests() ([]int, error) {
	h, err := a.o.Old.Configuration().Releases.History(a.old.Name)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, r := range h {
		if _, docs := splitCRDs(r.Manifest); len(docs) > 0 {
			out = append(out, r.Version)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ErrNoAdoption: there is no adoption in progress to undo.
var ErrNoAdoption = errors.New("no adoption in progress")

// Undo brings the old release back after an adoption that was interrupted (the process
// killed): what its record says was done is undone in reverse order, ours is uninstalled.
// A complete adoption is not undone.
func Undo(ctx context.Context, o Options) (*Result, error) {
	rec, err := LoadRecord(ctx, o.Kube, o.Ours.Namespace(), o.Ours.Name())
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, ErrNoAdoption
	}
	if rec.done(recordedCompletion) {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("the adoption of %s/%s into %s is complete", rec.FromNamespace, rec.From, o.Ours.Name()),
			Fix:    "nothing to recover; to go back to the old release, uninstall ours and scale the old one up, or restore a backup",
		}
	}
	a := newAdoption(o)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := a.lock(ctx, cancel); err != nil {
		return nil, err
	}
	defer a.unlock(ctx)
	a.rec = rec
	if a.old, err = readOld(ctx, o.Old); err != nil {
		return nil, err
	}
	a.secrets = &secretCarrier{kube: o.Kube, old: a.old, ours: o.Ours.Name(), ns: o.Ours.Namespace()}
	a.crds = &crdOwner{releases: o.Old.Configuration().Releases, dyn: o.Dynamic, old: a.old}
	phases := a.phases()
	// A run killed while installing ours recorded no install, but left a release to remove.
	_, curErr := o.Ours.Current(ctx)
	oursExists := curErr == nil
	var errs []error
	for i := len(phases) - 1; i >= 0; i-- {
		s := phases[i].(*step)
		if !rec.done(s.title) && !(s.title == PhaseInstall && oursExists) {
			continue
		}
		did, err := s.Cleanup(ctx)
		a.o.Observer.CleanupFinished(s.title, did, err)
		r := phase.PhaseReport{Phase: s.title, Status: "undone", Detail: did}
		if err != nil {
			r.Status, r.Detail = "failed", err.Error()
			errs = append(errs, fmt.Errorf("undoing %s: %w", s.title, err))
		}
		a.res.Phases = append(a.res.Phases, r)
	}
	if err := errors.Join(errs...); err != nil {
		return a.res, fmt.Errorf("%w\nrun recover again once the cause is fixed", err)
	}
	return a.res, deleteRecord(ctx, o.Kube, o.Ours.Namespace(), o.Ours.Name())
}
