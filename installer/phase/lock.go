package phase

import (
	"context"
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// TitleLock is the lock phase's title (stable: tests and the e2e suite refer to it).
const TitleLock = "lock"

// Revisions is what the lock phase reads and repairs of a release's Helm history
// (*release.Client).
type Revisions interface {
	Current(ctx context.Context) (*helmrelease.Release, error)
	FailPending(ctx context.Context, why string) (int, error)
}

// Lock is the first phase of every action on a release: it takes the release's lock (a Lease,
// see release.Lock) and holds it until the pipeline ends. A lost lease cancels the pipeline
// through Abort, with release.ErrLockLost as the cause. Its finalizer runs whatever happened:
// it marks a revision this run created and left pending as failed (Helm's background work
// after a cancellation may not have), then releases the lock. A revision that was pending
// before the run is a crashed run's: `recover` deals with it.
type Lock struct {
	Lock *release.Lock
	// Revisions is the release's history; nil for an action that makes no revision (backup,
	// restore).
	Revisions Revisions
	// Abort cancels the pipeline's context (the one given to Manager.Run).
	Abort context.CancelCauseFunc
	// Why is written on a pending revision the finalizer marks failed ("": Helm's status).
	Why string
	// Say is told what the finalizer did; Debugf the lock's identity (both may be nil).
	Say    func(msg string)
	Debugf func(format string, args ...any)

	held  *release.Held
	start int           // newest revision when the lock was taken
	stop  chan struct{} // ends the lease watch
}

var (
	_ Phase     = (*Lock)(nil)
	_ Finalizer = (*Lock)(nil)
)

func (l *Lock) Title() string { return TitleLock }

// Run takes the lock, or fails with a *release.LockedError naming the holder.
func (l *Lock) Run(ctx context.Context) error {
	held, err := l.Lock.Acquire(ctx)
	if err != nil {
		return err
	}
	l.held, l.stop = held, make(chan struct{})
	if l.Debugf != nil {
		l.Debugf("lock %s taken as %s", l.Lock.Name(), l.Lock.Identity())
	}
	if l.Revisions != nil {
		if cur, err := l.Revisions.Current(ctx); err == nil {
			l.start = cur.Version
		}
	}
	go func() {
		select {
		case <-held.Lost():
			if l.Abort != nil {
				l.Abort(release.ErrLockLost)
			}
		case <-l.stop:
		}
	}()
	return nil
}

// Finalize marks a revision this run left pending as failed and releases the lock.
func (l *Lock) Finalize(ctx context.Context) error {
	close(l.stop)
	var errs []error
	if l.Revisions != nil {
		if cur, err := l.Revisions.Current(ctx); err == nil && cur.Version > l.start {
			if rev, err := l.Revisions.FailPending(ctx, l.Why); err != nil {
				errs = append(errs, err)
			} else if rev > 0 && l.Say != nil {
				l.Say(fmt.Sprintf("revision %d was left pending: marked failed", rev))
			}
		}
	}
	if err := l.held.Release(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
