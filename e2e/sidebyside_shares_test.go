package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// On two cores' shares, a scenario with Polyaxon's programs waiting for another does not hold
// back a control-plane one that fits beside the running one, and goes before it once it fits.
func TestSharesLargestFittingFirst(t *testing.T) {
	s := newShares(5)
	s.acquire(realPrograms)
	order := make(chan string, 3)
	start := func(name string, share machineShare) {
		go func() { s.acquire(share); order <- name }()
	}
	start("programs", realPrograms)
	time.Sleep(50 * time.Millisecond)
	start("control plane 1", controlPlaneOnly)
	assert.Equal(t, "control plane 1", <-order, "fits beside the running scenario")
	start("control plane 2", controlPlaneOnly)
	time.Sleep(50 * time.Millisecond)
	s.release(realPrograms)
	assert.Equal(t, "programs", <-order, "the larger share first once it fits")
	s.release(controlPlaneOnly)
	assert.Equal(t, "control plane 2", <-order)
}

// Among waiting scenarios of one share, the longest goes first, whichever started waiting first.
func TestSharesLongestOfAShareFirst(t *testing.T) {
	for _, longestWaitsFirst := range []bool{true, false} {
		s := newShares(5)
		s.acquire(realPrograms)
		order := make(chan string, 2)
		waitFor := map[bool]func(){
			true:  func() { s.wait(rank{share: realPrograms, longest: true}); order <- "longest" },
			false: func() { s.acquire(realPrograms); order <- "programs" },
		}
		go waitFor[longestWaitsFirst]()
		time.Sleep(50 * time.Millisecond)
		go waitFor[!longestWaitsFirst]()
		time.Sleep(50 * time.Millisecond)
		s.release(realPrograms)
		assert.Equal(t, "longest", <-order, "the longest waited first: %v", longestWaitsFirst)
		s.release(realPrograms)
		assert.Equal(t, "programs", <-order)
	}
}
