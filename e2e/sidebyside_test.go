package e2e

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// machineShare is how much of the machine a scenario with a cluster of its own takes while it
// runs, in shares of machineShares (two per core, plus one).
type machineShare int64

const (
	// controlPlaneOnly: a control plane and polyaxon-deploy, about one core at their busiest.
	controlPlaneOnly machineShare = 2
	// realPrograms: Polyaxon's Python programs besides (each API start is three Django
	// starts): more than a core. Two of them side by side ran out of CPU on two cores (17's
	// upgrade passed its 5-minute bound beside the README demo); one beside a control-plane
	// scenario fits.
	realPrograms machineShare = 3
)

// machineSharesEnv overrides the machine's shares: 3 runs the scenarios one at a time.
const machineSharesEnv = "POLYAXON_DEPLOY_E2E_SHARES"

func machineShares() int64 {
	if n, err := strconv.ParseInt(os.Getenv(machineSharesEnv), 10, 64); err == nil && n >= int64(realPrograms) {
		return n
	}
	return int64(2*runtime.NumCPU() + 1)
}

// shares hands the machine out. The largest waiting share that fits goes first: the scenarios
// with Polyaxon's programs are the longest and cannot run beside each other, so they are the
// suite's critical path and start one after another as early as possible, while control-plane
// scenarios fill what is left. (A first-come-first-served semaphore would let one of them,
// waiting for the other to end, hold back every smaller share queued behind it.) Among equal
// shares, one asked for as the longest (acquireLongest) goes first.
type shares struct {
	mu      sync.Mutex
	changed *sync.Cond
	free    int64
	waiting map[rank]int // waiting scenarios by rank
}

// rank orders waiting scenarios: by share, then the longest first.
type rank struct {
	share   machineShare
	longest bool
}

func (r rank) before(o rank) bool {
	return r.share > o.share || (r.share == o.share && r.longest && !o.longest)
}

var machine = newShares(machineShares())

func newShares(n int64) *shares {
	s := &shares{free: n, waiting: map[rank]int{}}
	s.changed = sync.NewCond(&s.mu)
	return s
}

func (s *shares) acquire(share machineShare) { s.wait(rank{share: share}) }

func (s *shares) wait(r rank) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[r]++
	for !s.mayStart(r) {
		s.changed.Wait()
	}
	s.waiting[r]--
	s.free -= int64(r.share)
	s.changed.Broadcast() // a smaller share behind this one may fit in what is left
}

// mayStart: the share fits, and no waiting scenario ranked before it fits.
func (s *shares) mayStart(r rank) bool {
	if int64(r.share) > s.free {
		return false
	}
	for other, n := range s.waiting {
		if n > 0 && other.before(r) && int64(other.share) <= s.free {
			return false
		}
	}
	return true
}

func (s *shares) release(share machineShare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += int64(share)
	s.changed.Broadcast()
}

// sideBySide runs the test beside the others (t.Parallel) once the machine has its share
// free, and gives the share back when the test and its cleanups are done. On two cores that
// is two control-plane scenarios at once, or one of them beside one with Polyaxon's programs.
func sideBySide(t *testing.T, share machineShare) {
	t.Helper()
	t.Parallel()
	takeShare(t, rank{share: share})
}

// takeShare waits for the test's share of the machine and gives it back when the test and its
// cleanups are done: a parallel test that first does what needs little of the machine (the
// kind scenario creates its nodes and loads their images) takes it then.
func takeShare(t *testing.T, r rank) {
	t.Helper()
	share := r.share
	waited := time.Now()
	if share < realPrograms {
		// go test resumes every parallel test at once: let the scenarios with Polyaxon's
		// programs queue first, so that one starts now rather than after two of these.
		time.Sleep(time.Second)
	}
	machine.wait(r)
	// Cleanups run last registered first: the share comes back after the cleanups registered
	// later (a cluster created after this deleted), before those registered earlier.
	t.Cleanup(func() { machine.release(share) })
	if w := time.Since(waited); w > time.Second {
		t.Logf("waited %s for a share of the machine", w.Round(time.Second))
	}
}
