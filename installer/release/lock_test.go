package release

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestLockRefusesSecondRunAndReleases(t *testing.T) {
	ctx := context.Background()
	cs := k8sfake.NewClientset()
	a := NewLock(cs, "ns", "polyaxon", WithIdentity("run-a"))
	b := NewLock(cs, "ns", "polyaxon", WithIdentity("run-b"))

	held, err := a.Acquire(ctx)
	require.NoError(t, err)
	lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, "polyaxon-polyaxon-deploy-lock", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "run-a", *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(45), *lease.Spec.LeaseDurationSeconds)

	_, err = b.Acquire(ctx)
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "run-a", le.Holder)
	assert.Contains(t, err.Error(), "another polyaxon-deploy run holds the lock")
	assert.Contains(t, err.Error(), "kubectl -n ns delete lease polyaxon-polyaxon-deploy-lock")

	require.NoError(t, held.Release(ctx))
	require.NoError(t, held.Release(ctx), "release is idempotent")
	_, err = cs.CoordinationV1().Leases("ns").Get(ctx, "polyaxon-polyaxon-deploy-lock", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))

	heldB, err := b.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, heldB.Release(ctx))
}

func staleLease(t *testing.T, cs *k8sfake.Clientset, holder string, renewed time.Time) {
	t.Helper()
	at := metav1.NewMicroTime(renewed)
	_, err := cs.CoordinationV1().Leases("ns").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LockName("polyaxon"), Namespace: "ns"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(45)),
			AcquireTime: &at, RenewTime: &at, LeaseTransitions: ptr.To(int32(0)),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestLockTakesOverExpiredLease(t *testing.T) {
	ctx := context.Background()
	cs := k8sfake.NewClientset()
	staleLease(t, cs, "crashed-elsewhere", time.Now().Add(-time.Minute))
	held, err := NewLock(cs, "ns", "polyaxon", WithIdentity("run-b")).Acquire(ctx)
	require.NoError(t, err)
	defer held.Release(ctx)
	lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, LockName("polyaxon"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "run-b", *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(1), *lease.Spec.LeaseTransitions)
}

func TestLockTakesOverLeaseOfDeadLocalProcess(t *testing.T) {
	ctx := context.Background()
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name   string
		holder string
		alive  bool
		taken  bool
	}{
		{"dead local process", fmt.Sprintf("polyaxon-deploy@%s:4242:abcd", host), false, true},
		{"live local process", fmt.Sprintf("polyaxon-deploy@%s:4242:abcd", host), true, false},
		{"other host", "polyaxon-deploy@elsewhere:4242:abcd", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := k8sfake.NewClientset()
			staleLease(t, cs, tc.holder, time.Now())
			l := NewLock(cs, "ns", "polyaxon")
			l.alive = func(pid int) bool { assert.Equal(t, 4242, pid); return tc.alive }
			held, err := l.Acquire(ctx)
			if tc.taken {
				require.NoError(t, err)
				require.NoError(t, held.Release(ctx))
				return
			}
			var le *LockedError
			require.ErrorAs(t, err, &le)
		})
	}
}

func TestProcessAlive(t *testing.T) {
	assert.True(t, processAlive(os.Getpid()))
	// Past the kernel's pid_max: never a live process.
	assert.False(t, processAlive(1<<22+1))
}

func TestLockReportsLossWhenTakenOver(t *testing.T) {
	ctx := context.Background()
	cs := k8sfake.NewClientset()
	l := NewLock(cs, "ns", "polyaxon", WithIdentity("run-a"), WithLeaseDuration(90*time.Millisecond))
	held, err := l.Acquire(ctx)
	require.NoError(t, err)
	lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, LockName("polyaxon"), metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec.HolderIdentity = ptr.To("intruder")
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case <-held.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("loss of the lease was not reported")
	}
	require.NoError(t, held.Release(ctx))
	_, err = cs.CoordinationV1().Leases("ns").Get(ctx, LockName("polyaxon"), metav1.GetOptions{})
	require.NoError(t, err, "someone else's lease is not deleted")
}

func TestLockRenewsWhileHeld(t *testing.T) {
	ctx := context.Background()
	cs := k8sfake.NewClientset()
	held, err := NewLock(cs, "ns", "polyaxon", WithLeaseDuration(60*time.Millisecond)).Acquire(ctx)
	require.NoError(t, err)
	defer held.Release(ctx)
	first, err := cs.CoordinationV1().Leases("ns").Get(ctx, LockName("polyaxon"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := cs.CoordinationV1().Leases("ns").Get(ctx, LockName("polyaxon"), metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	}, 5*time.Second, 10*time.Millisecond)
	select {
	case <-held.Lost():
		t.Fatal("lease reported lost while renewing")
	default:
	}
}
