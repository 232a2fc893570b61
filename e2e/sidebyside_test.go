package e2e

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
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

// machine hands out the shares, first come first served: a scenario waiting for a large share
// is not overtaken by smaller ones behind it.
var machine = semaphore.NewWeighted(machineShares())

func machineShares() int64 {
	if n, err := strconv.ParseInt(os.Getenv(machineSharesEnv), 10, 64); err == nil && n >= int64(realPrograms) {
		return n
	}
	return int64(2*runtime.NumCPU() + 1)
}

// sideBySide runs the test beside the others (t.Parallel) once the machine has its share
// free, and gives the share back when the test and its cleanups are done. On two cores that
// is two control-plane scenarios at once, or one of them beside one with Polyaxon's programs.
func sideBySide(t *testing.T, share machineShare) {
	t.Helper()
	t.Parallel()
	waited := time.Now()
	if err := machine.Acquire(context.Background(), int64(share)); err != nil {
		t.Fatalf("waiting for a share of the machine: %v", err)
	}
	// Registered first, so it runs last: after the cluster's own cleanup deleted it.
	t.Cleanup(func() { machine.Release(int64(share)) })
	if w := time.Since(waited); w > time.Second {
		t.Logf("waited %s for a share of the machine", w.Round(time.Second))
	}
}
