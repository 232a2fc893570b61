package local

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ports of a local cluster's components. kwokctl picks them itself when left 0, but every
// kwokctl process searches downwards from 32766, so clusters created at the same moment by
// parallel test binaries choose the same ports, and whichever component binds second exits
// (the kwok controller does so after the API server is already serving, leaving a cluster
// whose pods never run). Create therefore chooses them with reservePorts.
const (
	// The range lies below Linux's default ephemeral range (32768-60999), so no outgoing
	// connection takes a port between its reservation and its bind, and below kwokctl's own
	// choices, for clusters started by kwokctl directly.
	clusterPortsLow  = 20000
	clusterPortsHigh = 30000
	// portReservationTTL outlasts one creation attempt; by then the components hold their
	// ports and a port in use is skipped anyway.
	portReservationTTL = 5 * time.Minute
	// componentPorts: etcd client and peer, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok controller.
	componentPorts = 6
)

// portRange is the ports from low up to, not including, high.
type portRange struct{ low, high int }

var clusterPorts = portRange{clusterPortsLow, clusterPortsHigh}

// portReservationFile is shared by every process on the machine that creates local
// clusters, whatever their work dirs.
var portReservationFile = filepath.Join(os.TempDir(), "polyaxon-deploy-local-ports")

// componentPortSet assigns reserved ports to the components.
type componentPortSet struct {
	Etcd, EtcdPeer, APIServer, ControllerManager, Scheduler, Kwok uint32
}

func newComponentPortSet(p []uint32) componentPortSet {
	return componentPortSet{Etcd: p[0], EtcdPeer: p[1], APIServer: p[2], ControllerManager: p[3], Scheduler: p[4], Kwok: p[5]}
}

// reservePorts returns n loopback ports that are free now and were not handed to another
// cluster within portReservationTTL, and records them in the reservation file. The file is
// read and rewritten under an exclusive flock, so concurrent callers (goroutines or
// processes) never get the same port.
func reservePorts(file string, r portRange, n int, now time.Time) ([]uint32, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("port reservations: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("port reservations: lock %s: %w", file, err)
	}
	// Closing the file releases the lock.

	reserved, err := readReservations(f, now)
	if err != nil {
		return nil, fmt.Errorf("port reservations %s: %w", file, err)
	}
	span := r.high - r.low
	start := rand.IntN(span) // spread clusters over the range; fewer collisions with strangers
	var ports []uint32
	for i := 0; i < span && len(ports) < n; i++ {
		port := uint32(r.low + (start+i)%span)
		if _, taken := reserved[port]; taken || !portFree(port) {
			continue
		}
		ports = append(ports, port)
		reserved[port] = now.Add(portReservationTTL)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("port reservations: only %d of %d ports free in %d-%d", len(ports), n, r.low, r.high)
	}
	if err := writeReservations(f, reserved); err != nil {
		return nil, fmt.Errorf("port reservations %s: %w", file, err)
	}
	return ports, nil
}

// ReservePorts reserves n loopback ports in the machine-wide reservation file, as Create does
// for a local cluster's components: for the servers that run on this machine beside a local
// cluster (Dex, the Gateway).
func ReservePorts(n int) ([]uint32, error) {
	return reservePorts(portReservationFile, clusterPorts, n, time.Now())
}

// readReservations parses "port unix-expiry" lines, dropping expired ones.
func readReservations(f *os.File, now time.Time) (map[uint32]time.Time, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[uint32]time.Time{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue // a line torn by a crash: its port is simply not reserved
		}
		port, perr := strconv.ParseUint(fields[0], 10, 32)
		exp, eerr := strconv.ParseInt(fields[1], 10, 64)
		if perr != nil || eerr != nil {
			continue
		}
		if t := time.Unix(exp, 0); t.After(now) {
			out[uint32(port)] = t
		}
	}
	return out, sc.Err()
}

func writeReservations(f *os.File, reserved map[uint32]time.Time) error {
	var b strings.Builder
	for port, exp := range reserved {
		fmt.Fprintf(&b, "%d %d\n", port, exp.Unix())
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(b.String()), 0)
	return err
}

// portFree reports whether a listener can bind 127.0.0.1:port now.
func portFree(port uint32) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
