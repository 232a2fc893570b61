package local

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// serviceProxy stands in for kube-proxy for the processes this machine runs in place of
// containers: a Service port gets a loopback listener, and a connection to it goes to a ready
// endpoint of the Service, read from its EndpointSlices as kube-proxy reads them (so a pod
// that is not Ready gets no traffic), that is to the host process of that pod or to the real
// server registered for it (the Postgres pod's PostgreSQL).
type serviceProxy struct {
	cs       kubernetes.Interface
	backends *backendTable

	mu        sync.Mutex
	listeners map[serviceKey]*serviceListener
	closed    bool
}

type serviceKey struct {
	namespace, name string
	port            int32
}

type serviceListener struct {
	ln   net.Listener
	next atomic.Uint64 // round robin over ready endpoints
}

// backendTable maps a pod's container port to the address on this machine that answers it.
type backendTable struct {
	mu    sync.Mutex
	addrs map[backendKey]string
}

type backendKey struct {
	namespace, pod string
	port           int32
}

func newBackendTable() *backendTable { return &backendTable{addrs: map[backendKey]string{}} }

func (t *backendTable) set(ns, pod string, port int32, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addrs[backendKey{ns, pod, port}] = addr
}

func (t *backendTable) removePod(ns, pod string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.addrs {
		if k.namespace == ns && k.pod == pod {
			delete(t.addrs, k)
		}
	}
}

func (t *backendTable) get(ns, pod string, port int32) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.addrs[backendKey{ns, pod, port}]
	return a, ok
}

func newServiceProxy(cs kubernetes.Interface, backends *backendTable) *serviceProxy {
	return &serviceProxy{cs: cs, backends: backends, listeners: map[serviceKey]*serviceListener{}}
}

// Address is the loopback address that reaches port of Service name in ns; the listener is
// made on first use and lives until Close.
func (p *serviceProxy) Address(ns, name string, port int32) (string, error) {
	key := serviceKey{ns, name, port}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", fmt.Errorf("service proxy closed")
	}
	if l, ok := p.listeners[key]; ok {
		return l.ln.Addr().String(), nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("service %s/%s port %d: %w", ns, name, port, err)
	}
	l := &serviceListener{ln: ln}
	p.listeners[key] = l
	go p.serve(key, l)
	return ln.Addr().String(), nil
}

// Close stops every listener (open connections end with their peers).
func (p *serviceProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, l := range p.listeners {
		_ = l.ln.Close()
	}
}

func (p *serviceProxy) serve(key serviceKey, l *serviceListener) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			addrs, err := p.endpoints(ctx, key)
			cancel()
			if err != nil || len(addrs) == 0 {
				return // as a Service without ready endpoints: the connection is refused
			}
			n := l.next.Add(1)
			for i := range addrs {
				up, err := net.DialTimeout("tcp", addrs[(int(n)+i)%len(addrs)], 5*time.Second)
				if err != nil {
					continue
				}
				pipe(conn, up)
				return
			}
		}()
	}
}

// endpoints are the host addresses of the Service port's ready endpoints.
func (p *serviceProxy) endpoints(ctx context.Context, key serviceKey) ([]string, error) {
	svc, err := p.cs.CoreV1().Services(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var portName string
	found := false
	for _, sp := range svc.Spec.Ports {
		if sp.Port == key.port {
			portName, found = sp.Name, true
		}
	}
	if !found {
		return nil, fmt.Errorf("service %s/%s has no port %d", key.namespace, key.name, key.port)
	}
	slices, err := p.cs.DiscoveryV1().EndpointSlices(key.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + key.name,
	})
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, s := range slices.Items {
		target := slicePort(s, portName)
		if target == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				continue
			}
			if a, ok := p.backends.get(ep.TargetRef.Namespace, ep.TargetRef.Name, target); ok {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs, nil
}

// slicePort is the container port an EndpointSlice gives for the Service port named name.
func slicePort(s discoveryv1.EndpointSlice, name string) int32 {
	for _, p := range s.Ports {
		if p.Port != nil && (p.Name != nil && *p.Name == name || p.Name == nil && name == "") {
			if p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP {
				return *p.Port
			}
		}
	}
	return 0
}

// pipe copies both ways until either side closes.
func pipe(a, b net.Conn) {
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
}
