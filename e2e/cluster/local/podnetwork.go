package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// podNetwork stands in for the pod network for a program of this machine that sends traffic to
// pod IPs, as a Gateway's data plane does with the addresses of a Service's EndpointSlices.
// kwok gives pods IPs that nothing answers; their host processes listen on loopback ports
// (backendTable). podNetwork is a SOCKS5 proxy on a loopback port (CONNECT, no
// authentication): the program gets it as HTTP_PROXY=socks5://<address> (Go's
// http.ProxyFromEnvironment; loopback destinations, the API server's, are never proxied), and
// a connection to <pod IP>:<container port> goes to the process of the pod with that IP, at
// the loopback port of that container port, whatever it carries (HTTP with its own Host
// header, websockets, TLS). An HTTP proxy would not do: Go's client writes a proxied
// request's target from its Host header, which a reverse proxy keeps from its client, so the
// pod's address never reaches the proxy. A connection to an IP of no running host program
// pod, or to a port its process does not serve, is refused, as a dead endpoint's is.
type podNetwork struct {
	cs       kubernetes.Interface
	backends *backendTable
	ln       net.Listener
	addr     string
}

func newPodNetwork(cs kubernetes.Interface, backends *backendTable) (*podNetwork, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pod network proxy: %w", err)
	}
	n := &podNetwork{cs: cs, backends: backends, ln: ln, addr: ln.Addr().String()}
	go n.serve()
	return n, nil
}

func (n *podNetwork) close() { _ = n.ln.Close() }

func (n *podNetwork) serve() {
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			return
		}
		go n.handle(conn)
	}
}

// SOCKS5 (RFC 1928) as much as a CONNECT without authentication needs.
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksNoMethod    = 0xff
	socksConnect     = 1
	socksIPv4        = 1
	socksDomain      = 3
	socksIPv6        = 4
	socksSucceeded   = 0
	socksRefused     = 5
	socksUnsupported = 7
)

func (n *podNetwork) handle(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(r, hdr); err != nil || hdr[0] != socksVersion {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return
	}
	if !bytes.Contains(methods, []byte{socksNoAuth}) {
		_, _ = conn.Write([]byte{socksVersion, socksNoMethod})
		return
	}
	if _, err := conn.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(r, req); err != nil || req[0] != socksVersion {
		return
	}
	reply := func(code byte) error {
		_, err := conn.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
		return err
	}
	var host string
	switch req[3] {
	case socksIPv4, socksIPv6:
		ip := make([]byte, 4)
		if req[3] == socksIPv6 {
			ip = make([]byte, 16)
		}
		if _, err := io.ReadFull(r, ip); err != nil {
			return
		}
		host = net.IP(ip).String()
	case socksDomain:
		l, err := r.ReadByte()
		if err != nil {
			return
		}
		name := make([]byte, l)
		if _, err := io.ReadFull(r, name); err != nil {
			return
		}
		host = string(name)
	default:
		_ = reply(socksUnsupported)
		return
	}
	pb := make([]byte, 2)
	if _, err := io.ReadFull(r, pb); err != nil {
		return
	}
	if req[1] != socksConnect {
		_ = reply(socksUnsupported)
		return
	}
	port := int32(pb[0])<<8 | int32(pb[1])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	target, err := n.backend(ctx, host, port)
	cancel()
	if err != nil {
		_ = reply(socksRefused)
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		_ = reply(socksRefused)
		return
	}
	if err := reply(socksSucceeded); err != nil {
		up.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	// What the client sent after its request, already buffered, goes first.
	if k := r.Buffered(); k > 0 {
		b, _ := r.Peek(k)
		if _, err := up.Write(b); err != nil {
			up.Close()
			return
		}
	}
	pipe(conn, up)
}

// backend is the loopback address of the process behind podIP:port.
func (n *podNetwork) backend(ctx context.Context, podIP string, port int32) (string, error) {
	pods, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + podIP})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !hasPodIP(p, podIP) {
			continue
		}
		if a, ok := n.backends.get(p.Namespace, p.Name, port); ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("no host program pod answers %s:%d", podIP, port)
}

func hasPodIP(p corev1.Pod, ip string) bool {
	for _, a := range p.Status.PodIPs {
		if a.IP == ip {
			return true
		}
	}
	return p.Status.PodIP == ip
}

// podNetworks are the proxies of the clusters handles in this process, one per handle.
var podNetworks = struct {
	sync.Mutex
	m map[*cluster.Cluster]*podNetwork
}{m: map[*cluster.Cluster]*podNetwork{}}

// PodNetworkProxy is the address (host:port) of a SOCKS5 proxy that reaches the pods of the
// cluster's host programs at their pod IPs and container ports (podNetwork), for a program of
// this machine that routes to EndpointSlice addresses: give a Go program
// HTTP_PROXY=socks5://<address>.
// It serves until the handle's background helpers stop (Close); on a handle of
// RunHostPrograms, until this process ends.
func PodNetworkProxy(c *cluster.Cluster) (string, error) {
	hosts := hostsOf(c)
	if hosts == nil {
		return "", fmt.Errorf("cluster %s runs no host programs (WithHostPrograms)", c.Name)
	}
	podNetworks.Lock()
	defer podNetworks.Unlock()
	if n, ok := podNetworks.m[c]; ok {
		return n.addr, nil
	}
	n, err := newPodNetwork(c.Clientset, hosts.backends)
	if err != nil {
		return "", err
	}
	podNetworks.m[c] = n
	done := c.BackgroundDone()
	if done == nil {
		return n.addr, nil
	}
	go func() {
		<-done
		podNetworks.Lock()
		delete(podNetworks.m, c)
		podNetworks.Unlock()
		n.close()
	}()
	return n.addr, nil
}
