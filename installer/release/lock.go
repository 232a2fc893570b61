package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Lock is a per-release mutual exclusion between polyaxon-deploy runs, held in a
// coordination.k8s.io Lease named <release>-polyaxon-deploy-lock in the release namespace.
// The holder renews it while it runs; a crashed run's lease expires after the lease duration,
// or at once when the crashed process ran on this host and is gone.
type Lock struct {
	kube      kubernetes.Interface
	namespace string
	name      string
	identity  string
	duration  time.Duration
	renew     time.Duration
	now       func() time.Time
	hostname  string
	alive     func(pid int) bool
}

// LockOption configures a Lock.
type LockOption func(*Lock)

// WithLeaseDuration sets how long the lease stays valid without renewal (renewed every third of it).
func WithLeaseDuration(d time.Duration) LockOption {
	return func(l *Lock) { l.duration, l.renew = d, d/3 }
}

// WithIdentity overrides the holder identity (default polyaxon-deploy@<host>:<pid>:<random>).
func WithIdentity(id string) LockOption { return func(l *Lock) { l.identity = id } }

// LockName is the name of the Lease that guards the release.
func LockName(release string) string { return release + "-polyaxon-deploy-lock" }

// DefaultLeaseDuration is how long a crashed run on another machine can block the next one.
const DefaultLeaseDuration = 45 * time.Second

// NewLock returns the lock of release in namespace.
func NewLock(kube kubernetes.Interface, namespace, release string, opts ...LockOption) *Lock {
	host, _ := os.Hostname()
	l := &Lock{
		kube:      kube,
		namespace: namespace,
		name:      LockName(release),
		duration:  DefaultLeaseDuration,
		renew:     DefaultLeaseDuration / 3,
		now:       time.Now,
		hostname:  host,
		alive:     processAlive,
	}
	l.identity = fmt.Sprintf("polyaxon-deploy@%s:%d:%s", host, os.Getpid(), nonce())
	for _, o := range opts {
		o(l)
	}
	return l
}

// Lock returns the lock of this client's release.
func (c *Client) Lock(opts ...LockOption) *Lock { return NewLock(c.kube, c.namespace, c.name, opts...) }

// Name is the name of the Lease.
func (l *Lock) Name() string { return l.name }

// Identity is the holder identity this lock writes into the Lease.
func (l *Lock) Identity() string { return l.identity }

// LockedError says who holds the lock and until when.
type LockedError struct {
	Namespace, Lease string
	Holder           string
	Since, Expires   time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("another polyaxon-deploy run holds the lock of this release (Lease %s/%s, holder %s, since %s, expires %s unless renewed): "+
		"wait for it to finish; if that run crashed, retry after the expiry or delete the Lease with `kubectl -n %s delete lease %s`",
		e.Namespace, e.Lease, e.Holder, e.Since.Format(time.RFC3339), e.Expires.Format(time.RFC3339), e.Namespace, e.Lease)
}

// ErrLockLost is the cause of the context cancellation when the lease could not be renewed.
var ErrLockLost = errors.New("lost the release lock (Lease renewal failed)")

// Held is an acquired lock. Release it when done.
type Held struct {
	l      *Lock
	stop   chan struct{}
	lost   chan struct{}
	done   chan struct{}
	once   sync.Once
	lostMu sync.Mutex
	err    error
}

// Acquire takes the lock or returns a *LockedError when another live run holds it.
func (l *Lock) Acquire(ctx context.Context) (*Held, error) {
	leases := l.kube.CoordinationV1().Leases(l.namespace)
	for attempt := 0; attempt < 3; attempt++ {
		now := metav1.NewMicroTime(l.now())
		lease, err := leases.Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, Labels: ToolLabels(strings.TrimSuffix(l.name, "-polyaxon-deploy-lock"), "lock")},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To(l.identity),
					LeaseDurationSeconds: ptr.To(int32(l.duration / time.Second)),
					AcquireTime:          &now,
					RenewTime:            &now,
				},
			}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // raced with another run: look again
			}
			if err != nil {
				return nil, fmt.Errorf("creating Lease %s/%s: %w", l.namespace, l.name, err)
			}
			return l.hold(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading Lease %s/%s: %w", l.namespace, l.name, err)
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder != "" && holder != l.identity && !l.expired(lease) && !l.holderGone(holder) {
			return nil, l.lockedError(lease)
		}
		lease.Spec.HolderIdentity = ptr.To(l.identity)
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(l.duration / time.Second))
		lease.Spec.AcquireTime = &now
		lease.Spec.RenewTime = &now
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		// The resourceVersion from Get makes this a compare-and-swap.
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("taking over Lease %s/%s: %w", l.namespace, l.name, err)
		}
		return l.hold(), nil
	}
	return nil, fmt.Errorf("taking Lease %s/%s: other runs keep changing it", l.namespace, l.name)
}

func (l *Lock) expired(lease *coordinationv1.Lease) bool {
	t := lease.Spec.RenewTime
	if t == nil {
		t = lease.Spec.AcquireTime
	}
	if t == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return l.now().After(t.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second))
}

// holderGone reports a holder that ran on this host and whose process no longer exists
// (a run killed with SIGKILL), so the next run need not wait for the expiry.
func (l *Lock) holderGone(holder string) bool {
	rest, ok := strings.CutPrefix(holder, "polyaxon-deploy@")
	if !ok {
		return false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 || parts[0] != l.hostname || l.hostname == "" {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !l.alive(pid)
}

func (l *Lock) lockedError(lease *coordinationv1.Lease) error {
	e := &LockedError{Namespace: l.namespace, Lease: l.name, Holder: ptr.Deref(lease.Spec.HolderIdentity, "")}
	if lease.Spec.AcquireTime != nil {
		e.Since = lease.Spec.AcquireTime.Time
	}
	if t := lease.Spec.RenewTime; t != nil && lease.Spec.LeaseDurationSeconds != nil {
		e.Expires = t.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	}
	return e
}

func (l *Lock) hold() *Held {
	h := &Held{l: l, stop: make(chan struct{}), lost: make(chan struct{}), done: make(chan struct{})}
	go h.renewLoop()
	return h
}

// Lost is closed when the lease could not be renewed or another run took it over.
func (h *Held) Lost() <-chan struct{} { return h.lost }

func (h *Held) renewLoop() {
	defer close(h.done)
	t := time.NewTicker(h.l.renew)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		err := h.renewOnce()
		if err == nil {
			failures = 0
			continue
		}
		failures++
		// One transient error is fine: the lease outlives two renewal periods.
		if failures >= 2 || errors.Is(err, errTakenOver) {
			h.lostMu.Lock()
			h.err = err
			h.lostMu.Unlock()
			close(h.lost)
			return
		}
	}
}

var errTakenOver = errors.New("lease taken over by another holder")

func (h *Held) renewOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.l.renew)
	defer cancel()
	leases := h.l.kube.CoordinationV1().Leases(h.l.namespace)
	lease, err := leases.Get(ctx, h.l.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != h.l.identity {
		return errTakenOver
	}
	now := metav1.NewMicroTime(h.l.now())
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// Release stops renewing and deletes the Lease if this run still holds it.
func (h *Held) Release(ctx context.Context) error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		leases := h.l.kube.CoordinationV1().Leases(h.l.namespace)
		lease, gerr := leases.Get(ctx, h.l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			return
		}
		if gerr != nil {
			err = fmt.Errorf("releasing Lease %s/%s: %w", h.l.namespace, h.l.name, gerr)
			return
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") != h.l.identity {
			return // someone took it over after our lease expired; not ours to delete
		}
		derr := leases.Delete(ctx, h.l.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
		if derr != nil && !apierrors.IsNotFound(derr) {
			err = fmt.Errorf("releasing Lease %s/%s: %w", h.l.namespace, h.l.name, derr)
		}
	})
	return err
}

// sigZero probes a process without affecting it.
var sigZero = syscall.Signal(0)

func nonce() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// processAlive: signal 0 checks existence; "process already finished" means gone, any other
// answer (including permission denied) means it exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(sigZero)
	return !errors.Is(err, os.ErrProcessDone)
}
