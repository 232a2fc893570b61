package gatewayapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// The Gateway API implementation of the local provider: Traefik, built from the Go module proxy
// by e2e/scripts/build-traefik.sh, run on this machine as the Gateway's controller and data
// plane, with the Gateway API CRDs (standard channel) of the version Traefik is built against.
//
// How traffic reaches the pods: Traefik's Kubernetes Gateway provider routes an HTTPRoute's
// backendRef (a Service port) to the addresses of the Service's EndpointSlices, that is to
// pod IPs and container ports, as it would on a real cluster. Those IPs are kwok's, answered
// by nothing; Traefik runs with HTTP_PROXY=socks5://<the cluster's pod network proxy>
// (local.PodNetworkProxy), which takes each connection to the loopback port of the pod's host
// process.
// Readiness is the EndpointSlice's: a pod that is not Ready is not routed to.

// ControllerName is the controllerName of Traefik's GatewayClass.
const ControllerName = "traefik.io/gateway-controller"

// Group is Gateway API's group.
const Group = "gateway.networking.k8s.io"

// Gateway API resources (v1).
var (
	GatewayClassesGVR = schema.GroupVersionResource{Group: Group, Version: "v1", Resource: "gatewayclasses"}
	GatewaysGVR       = schema.GroupVersionResource{Group: Group, Version: "v1", Resource: "gateways"}
	HTTPRoutesGVR     = schema.GroupVersionResource{Group: Group, Version: "v1", Resource: "httproutes"}
)

// Build is what build-traefik.sh made: Traefik's binary and the directory of the
// standard channel's CRDs.
type Build struct {
	Traefik, CRDs string
}

// EnsureBuild runs e2e/scripts/build-traefik.sh (a build of several minutes the first
// time, cached under cluster.CacheDir; a no-op afterwards). Build progress goes to progress (may be nil).
func EnsureBuild(ctx context.Context, progress io.Writer) (Build, error) {
	p, err := cluster.RunBuildScript(ctx, "build-traefik.sh", 2, progress)
	if err != nil {
		return Build{}, err
	}
	return Build{Traefik: p[0], CRDs: p[1]}, nil
}

// InstallCRDs applies every object of the YAML files in dir (the CRDs, and the
// standard channel's ValidatingAdmissionPolicy and its binding) server-side, then waits until
// the API serves GatewayClasses, Gateways and HTTPRoutes.
func InstallCRDs(ctx context.Context, c *cluster.Cluster, dir string) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Gateway API CRDs in %s", dir)
	}
	sort.Strings(files)
	resources := map[string]schema.GroupVersionResource{
		"CustomResourceDefinition":         {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvr, ok := resources[obj.GetKind()]
			if !ok {
				return fmt.Errorf("%s: kind %s is not one the Gateway API's standard channel installs", f, obj.GetKind())
			}
			if _, err := dyn.Resource(gvr).Apply(ctx, obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: "polyaxon-deploy-e2e", Force: true}); err != nil {
				return fmt.Errorf("apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), f, err)
			}
		}
	}
	for {
		var last error
		for _, gvr := range []schema.GroupVersionResource{GatewayClassesGVR, GatewaysGVR, HTTPRoutesGVR} {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				last = err
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Gateway API CRDs not served: %w", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Options says which Gateway Start makes.
type Options struct {
	// Namespace of the Gateway and its certificate's Secret (default gateway-system).
	Namespace string
	// Class is the GatewayClass's name (default traefik); Name the Gateway's (default polyaxon).
	Class, Name string
	// Hostnames the certificate is for (default localhost); 127.0.0.1 is always in it.
	Hostnames []string
	// NodeSelector places Traefik's pod (StartInCluster).
	NodeSelector map[string]string
	// Dir is where StartInCluster writes the CA's certificate (default: a new
	// temporary directory).
	Dir string
}

// Gateway is a running Gateway: Traefik on this machine, its HTTPS listener terminating TLS
// with a certificate signed by a CA made at start.
type Gateway struct {
	Namespace, Name, Class string
	// Listener is the HTTPS listener's name (a parentRef's sectionName).
	Listener string
	// Address is where the listener answers (127.0.0.1:port; the listener's port).
	Address string
	// CAFile holds the CA's certificate (PEM), CAPEM the same bytes.
	CAFile string
	CAPEM  []byte
	// LogPath is Traefik's log.
	LogPath string

	proc *local.HostProcess
}

// URL is https://localhost:<port>, which the certificate names.
func (g *Gateway) URL() string {
	_, port, _ := net.SplitHostPort(g.Address)
	return "https://localhost:" + port
}

// Client is an HTTP client that trusts the Gateway's CA (and nothing else).
func (g *Gateway) Client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.CAPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// Stop ends Traefik on this machine (Start); one in the cluster ends with it.
func (g *Gateway) Stop() {
	if g.proc != nil {
		g.proc.Stop(10 * time.Second)
	}
}

// Done is closed when Traefik on this machine has exited (never for one in the cluster).
func (g *Gateway) Done() <-chan struct{} {
	if g.proc == nil {
		return nil
	}
	return g.proc.Done()
}

// Start runs Traefik for the cluster (local provider, with host programs): a namespace,
// a CA and a certificate for opts.Hostnames in a kubernetes.io/tls Secret, a GatewayClass of
// Traefik's controller, a Gateway with one HTTPS listener ("https", routes from every
// namespace) on a free loopback port, and Traefik watching them through the cluster's
// kubeconfig. It returns once the Gateway is Programmed. The CRDs must be installed
// (InstallCRDs). The process lives until Stop (or the cluster's deletion: its working
// directory is under the cluster's).
func Start(ctx context.Context, c *cluster.Cluster, traefik string, opts Options) (*Gateway, error) {
	podsDir := local.PodsDir(c)
	if podsDir == "" {
		return nil, fmt.Errorf("cluster %s: the Gateway runs on the local provider only", c.Name)
	}
	proxy, err := local.PodNetworkProxy(c)
	if err != nil {
		return nil, err
	}
	ports, err := local.ReservePorts(2)
	if err != nil {
		return nil, err
	}
	listenPort, pingPort := ports[0], ports[1]
	g := newGateway(opts)
	g.Address = fmt.Sprintf("127.0.0.1:%d", listenPort)

	// Under the pods' directory (local.PodsDir): a cluster's deletion kills what runs there.
	dir := filepath.Join(podsDir, "gateway_"+g.Namespace+"_"+g.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dyn, err := applyGateway(ctx, c, g, opts.Hostnames, int(listenPort), dir)
	if err != nil {
		return nil, err
	}

	g.LogPath = filepath.Join(dir, "traefik.log")
	g.proc = &local.HostProcess{
		Path: traefik,
		Args: traefikArgs(g.Listener, fmt.Sprintf("127.0.0.1:%d", listenPort), fmt.Sprintf("127.0.0.1:%d", pingPort), "127.0.0.1"),
		// KUBECONFIG: Traefik's Gateway provider reads it when it runs out of a cluster.
		// HTTP_PROXY: the pod network (see above); the API server, on loopback, is not proxied.
		Env: append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "HTTP_PROXY=socks5://"+proxy,
			"http_proxy=", "HTTPS_PROXY=", "https_proxy=", "NO_PROXY=", "no_proxy="),
		Dir:     dir,
		LogPath: g.LogPath,
	}
	if err := g.proc.Start(); err != nil {
		return nil, err
	}
	if err := g.waitProgrammed(ctx, dyn, pingPort); err != nil {
		g.Stop()
		return nil, fmt.Errorf("%w (Traefik's log: %s)\n%s", err, g.LogPath, cluster.LogTail(g.LogPath, 20))
	}
	return g, nil
}

// traefikArgs runs Traefik as the Gateway's controller and data plane: its Kubernetes Gateway
// provider, the listener's entry point at listenAddr, a ping at pingAddr, statusIP as the
// Gateway's address in its status.
func traefikArgs(listener, listenAddr, pingAddr, statusIP string) []string {
	return []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--log.level=INFO",
		fmt.Sprintf("--entryPoints.%s.address=%s", listener, listenAddr),
		"--entryPoints.traefik.address=" + pingAddr,
		"--ping=true",
		"--ping.entryPoint=traefik",
		"--providers.kubernetesGateway=true",
		"--providers.kubernetesGateway.statusAddress.ip=" + statusIP,
	}
}

// newGateway is a Gateway of opts with their defaults.
func newGateway(opts Options) *Gateway {
	g := &Gateway{Namespace: opts.Namespace, Name: opts.Name, Class: opts.Class, Listener: "https"}
	if g.Namespace == "" {
		g.Namespace = "gateway-system"
	}
	if g.Class == "" {
		g.Class = "traefik"
	}
	if g.Name == "" {
		g.Name = "polyaxon"
	}
	return g
}

// applyGateway makes g's namespace, a CA (written to dir) and a certificate for hosts
// (localhost when none) in a kubernetes.io/tls Secret, a GatewayClass of Traefik's controller
// and the Gateway with one HTTPS listener on port, taking routes from every namespace.
func applyGateway(ctx context.Context, c *cluster.Cluster, g *Gateway, hosts []string, port int, dir string) (dynamic.Interface, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost"}
	}
	caPEM, certPEM, keyPEM, err := newServingCertificate(hosts)
	if err != nil {
		return nil, err
	}
	g.CAPEM, g.CAFile = caPEM, filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(g.CAFile, caPEM, 0o644); err != nil {
		return nil, err
	}

	cs := c.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: g.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name + "-tls", Namespace: g.Namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	}
	if _, err := cs.CoreV1().Secrets(g.Namespace).Create(ctx, secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cs.CoreV1().Secrets(g.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	objects := []struct {
		gvr  schema.GroupVersionResource
		yaml string
	}{
		{GatewayClassesGVR, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %s}
spec: {controllerName: %s}
`, g.Class, ControllerName)},
		{GatewaysGVR, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s, namespace: %s}
spec:
  gatewayClassName: %s
  listeners:
  - name: %s
    protocol: HTTPS
    port: %d
    tls:
      mode: Terminate
      certificateRefs: [{kind: Secret, name: %s}]
    allowedRoutes:
      namespaces: {from: All}
`, g.Name, g.Namespace, g.Class, g.Listener, port, secret.Name)},
	}
	for _, o := range objects {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(o.yaml), &u.Object); err != nil {
			return nil, err
		}
		ri := dyn.Resource(o.gvr).Namespace(u.GetNamespace())
		if u.GetNamespace() == "" {
			ri = dyn.Resource(o.gvr)
		}
		if _, err := ri.Apply(ctx, u.GetName(), &u, metav1.ApplyOptions{FieldManager: "polyaxon-deploy-e2e", Force: true}); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return dyn, nil
}

// gatewayProgrammed says whether the Gateway's controller set it Programmed, and what it shows.
func gatewayProgrammed(ctx context.Context, dyn dynamic.Interface, g *Gateway) (bool, string, error) {
	gw, err := dyn.Resource(GatewaysGVR).Namespace(g.Namespace).Get(ctx, g.Name, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	cond := Condition(gw, "Programmed")
	return cond != nil && cond["status"] == "True", fmt.Sprintf("Gateway %s/%s not Programmed: %v", g.Namespace, g.Name, cond), nil
}

// waitProgrammed waits until Traefik answers its ping and has set the Gateway Programmed.
func (g *Gateway) waitProgrammed(ctx context.Context, dyn dynamic.Interface, pingPort uint32) error {
	ping := fmt.Sprintf("http://127.0.0.1:%d/ping", pingPort)
	last := "not started"
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-g.proc.Done():
			return false, fmt.Errorf("traefik exited with code %d", g.proc.ExitCode())
		default:
		}
		resp, err := http.Get(ping)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = "ping: " + resp.Status
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		ok, why, err := gatewayProgrammed(ctx, dyn, g)
		last = why
		return ok, err
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("Gateway %s/%s: %s", g.Namespace, g.Name, last)
	}
	return err
}

// Condition is the condition of type typ in obj's status.conditions, nil when absent.
func Condition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	return findCondition(conds, typ)
}

func findCondition(conds []any, typ string) map[string]any {
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// RouteParentCondition is condition typ of the route's status.parents entry for the Gateway
// ns/name set by controller, nil when that parent or condition is not there yet.
func RouteParentCondition(route *unstructured.Unstructured, controller, ns, name, typ string) map[string]any {
	parents, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	for _, p := range parents {
		m, ok := p.(map[string]any)
		if !ok || m["controllerName"] != controller {
			continue
		}
		ref, _ := m["parentRef"].(map[string]any)
		if ref["name"] != name || ref["namespace"] != nil && ref["namespace"] != ns {
			continue
		}
		conds, _ := m["conditions"].([]any)
		return findCondition(conds, typ)
	}
	return nil
}

// newServingCertificate makes a CA and a leaf certificate for hosts and 127.0.0.1, signed by
// it (ECDSA P-256, valid for a day); PEM encoded.
func newServingCertificate(hosts []string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now().Add(-time.Minute)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "polyaxon-deploy e2e gateway CA"},
		NotBefore:             now,
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now,
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     hosts,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
