package local

import (
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Clusters created at once (parallel tests, parallel test binaries) must never be handed
// the same port: that is what killed kwok controllers when kwokctl chose ports itself.
// testPorts lies outside the range real clusters use, so clusters of tests running beside
// these do not hold its ports.
var testPorts = portRange{30000, 30200}

func TestReservePortsConcurrentCallersGetDistinctPorts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ports")
	const callers = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		seen  = map[uint32]int{}
		errs  []error
		start = time.Now()
	)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports, err := reservePorts(file, testPorts, componentPorts, start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, p := range ports {
				seen[p]++
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	assert.Len(t, seen, callers*componentPorts, "every port handed out once")
	for p, n := range seen {
		assert.Equal(t, 1, n, "port %d handed out %d times", p, n)
		assert.True(t, int(p) >= testPorts.low && int(p) < testPorts.high, "port %d outside %v", p, testPorts)
	}
}

func TestReservePortsSkipsPortsInUseAndHonoursExpiry(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ports")
	now := time.Now()
	first, err := reservePorts(file, testPorts, componentPorts, now)
	require.NoError(t, err)

	// Hold one of them: once its reservation has expired it must still be skipped while in use.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(first[0]), 10)))
	require.NoError(t, err)
	defer l.Close()
	assert.False(t, portFree(first[0]))

	// After the TTL every port of the range but the held one can be handed out again.
	later := now.Add(portReservationTTL + time.Second)
	var free int
	for p := testPorts.low; p < testPorts.high; p++ {
		if portFree(uint32(p)) {
			free++
		}
	}
	all, err := reservePorts(file, testPorts, free, later)
	require.NoError(t, err)
	assert.NotContains(t, all, first[0], "a port with a listener was handed out")
	for _, p := range first[1:] {
		assert.Contains(t, all, p, "an expired reservation must be released")
	}

	// While those reservations are valid nothing is handed out twice: the range is dry.
	_, err = reservePorts(file, testPorts, 1, later)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only 0 of 1 ports free")
}
