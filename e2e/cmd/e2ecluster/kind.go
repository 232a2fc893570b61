package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/gatewayapi"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
)

// The kind demo (E2E_PROVIDER=kind make demo, docs/kind-offline.md): nodes from the node image
// that e2e/scripts/build-kind-images.sh builds, on its private Docker engine; the chart's images
// (built by the same script) loaded into the nodes of the pools that run them, nothing pulled;
// one directory of this machine mounted into every node as the artifacts store's shared
// volume; the gateway reached through `kubectl port-forward`, as administrators reach it.

// kindArtifactsPath is where every node sees the demo's shared artifacts directory
// (values/kind-demo.yaml names it as the store's hostPath volume).
const kindArtifactsPath = "/polyaxon-artifacts"

// kindProvider is the offline kind provider on the private engine (unless DOCKER_HOST names
// another), with the demo's artifacts directory in every node.
func kindProvider(ctx context.Context) (*kind.Provider, error) {
	if os.Getenv("DOCKER_HOST") == "" {
		if err := os.Setenv("DOCKER_HOST", kind.OfflineDockerHost); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(demoDir(), "kind-artifacts")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	// Runs and the gateway write as their own users (2222 by default).
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, err
	}
	return kind.NewOfflineProvider(ctx, kind.WithNodeMounts(kindv1alpha4.Mount{HostPath: dir, ContainerPath: kindArtifactsPath}))
}

// loadKindImages loads images into the nodes: run images into the experiments and builds
// pools, the rest into the core pool.
func loadKindImages(ctx context.Context, p *kind.Provider, c *cluster.Cluster, images []string) error {
	start := time.Now()
	sets := kind.ImagesByPool(images)
	if err := p.LoadImages(ctx, c, sets...); err != nil {
		return err
	}
	for _, set := range sets {
		fmt.Fprintf(os.Stderr, "loaded %s into the nodes of %s\n", strings.Join(set.Images, ", "), strings.Join(set.Pools, ", "))
	}
	fmt.Fprintf(os.Stderr, "images loaded in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// demoForward is one of the kind demo's `kubectl port-forward`s, in a session of its own: its
// pid, address and log files are named after it in the demo's directory.
type demoForward struct{ name, namespace, target, remotePort string }

// gatewayForward reaches the gateway Service; httpsForward the Gateway's data plane.
func gatewayForward(ns string) demoForward {
	return demoForward{name: "kind-forward", namespace: ns, target: "svc/" + gatewayService, remotePort: "http"}
}

func httpsForward(gw kindGatewayInfo) demoForward {
	return demoForward{name: "kind-https-forward", namespace: gw.Namespace, target: "svc/traefik", remotePort: gw.Listener}
}

func (f demoForward) pidFile() string  { return filepath.Join(demoDir(), f.name+".pid") }
func (f demoForward) addrFile() string { return filepath.Join(demoDir(), f.name+"-address") }
func (f demoForward) logFile() string  { return filepath.Join(demoDir(), f.name+".log") }

// kindGateway (`e2ecluster kind-gateway`) makes the gateway Service reachable on a loopback
// port of this machine with a `kubectl port-forward` of its own session (started again when it
// stopped), waits until Polyaxon's API answers there, and prints its URL.
func kindGateway(c *cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	if s.Provider != "kind" {
		return fmt.Errorf("the %s demo: use `e2ecluster gateway`", s.Provider)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("wait"))
	defer cancel()
	last := "not started"
	for {
		fwd := gatewayForward(c.String("namespace"))
		addr, alive := fwd.running()
		if !alive {
			if addr, err = fwd.start(c.String("kubectl"), s.Kubeconfig); err != nil {
				return err
			}
		}
		url := "http://" + addr
		if last = apiAnswers(ctx, url); last == "" {
			fmt.Println(url)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Polyaxon's API did not answer through `kubectl port-forward` to service %s/%s in %s: %s (log: %s)",
				c.String("namespace"), gatewayService, c.Duration("wait"), last, gatewayForward("").logFile())
		case <-time.After(2 * time.Second):
		}
	}
}

// running is the port-forward's address and whether its process is alive.
func (f demoForward) running() (string, bool) {
	b, err := os.ReadFile(f.pidFile())
	if err != nil {
		return "", false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return "", false
	}
	addr, err := os.ReadFile(f.addrFile())
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(addr)), true
}

func (f demoForward) start(kubectl, kubeconfig string) (string, error) {
	if kubectl == "" {
		return "", errors.New("--kubectl is required to start the port-forward")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.OpenFile(f.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", f.namespace, "port-forward",
		"--address", "127.0.0.1", f.target, fmt.Sprintf("%d:%s", port, f.remotePort))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command, as the demo does
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("kubectl port-forward: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.WriteFile(f.addrFile(), []byte(addr+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(f.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return "", err
	}
	_ = cmd.Process.Release()
	return addr, nil
}

// stop ends the port-forward, if it runs.
func (f demoForward) stop() {
	if b, err := os.ReadFile(f.pidFile()); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	_ = os.Remove(f.pidFile())
	_ = os.Remove(f.addrFile())
}

// stopKindForwards ends the demo's port-forwards.
func stopKindForwards() {
	gatewayForward("").stop()
	httpsForward(kindGatewayInfo{}).stop()
	s3APIForward.stop()
	s3AdminForward.stop()
}

// kindGatewayInfo is the kind demo's Gateway, written by `up` once it is Programmed.
type kindGatewayInfo struct {
	CAFile, Namespace, Name, Listener string
}

func kindGatewayDir() string      { return filepath.Join(demoDir(), "kind-gateway") }
func kindGatewayInfoFile() string { return filepath.Join(kindGatewayDir(), "gateway.json") }

// startKindGateway runs the demo's Gateway in the cluster: the Gateway API CRDs of crds, and
// Traefik of image in a pod of the core node (gatewayapi.StartInCluster), terminating TLS
// with a certificate of a CA made now.
func startKindGateway(ctx context.Context, cl *cluster.Cluster, image, crds string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := gatewayapi.InstallCRDs(ctx, cl, crds); err != nil {
		return err
	}
	gw, err := gatewayapi.StartInCluster(ctx, cl, image, gatewayapi.Options{Dir: kindGatewayDir(),
		NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}})
	if err != nil {
		return err
	}
	b, err := json.Marshal(kindGatewayInfo{CAFile: gw.CAFile, Namespace: gw.Namespace, Name: gw.Name, Listener: gw.Listener})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Gateway %s/%s: Traefik (%s) in a pod of the core node, Programmed\n", gw.Namespace, gw.Name, image)
	return os.WriteFile(kindGatewayInfoFile(), b, 0o644)
}

// kindHTTPS (`e2ecluster kind-https`) makes the demo's Gateway reachable on a loopback port of
// this machine (`kubectl port-forward` to Traefik's Service, started again when it stopped),
// waits until it answers https with the demo's CA, and prints its URL, the CA's file and the
// Gateway's namespace, name and listener, a line each (as `e2ecluster https`).
func kindHTTPS(c *cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	b, err := os.ReadFile(kindGatewayInfoFile())
	if err != nil {
		return fmt.Errorf("the kind demo has no Gateway (`make demo-down`, then `E2E_PROVIDER=kind make demo`): %w", err)
	}
	var gw kindGatewayInfo
	if err := json.Unmarshal(b, &gw); err != nil {
		return err
	}
	ca, err := os.ReadFile(gw.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	fwd := httpsForward(gw)
	deadline := time.Now().Add(c.Duration("wait"))
	for {
		addr, alive := fwd.running()
		if !alive {
			if addr, err = fwd.start(c.String("kubectl"), s.Kubeconfig); err != nil {
				return err
			}
		}
		_, port, _ := net.SplitHostPort(addr)
		url := "https://localhost:" + port
		resp, err := client.Get(url + "/")
		if err == nil {
			resp.Body.Close()
			fmt.Printf("%s\n%s\n%s\n%s\n%s\n", url, gw.CAFile, gw.Namespace, gw.Name, gw.Listener)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Gateway did not answer https through `kubectl port-forward` in %s: %v (log: %s)", c.Duration("wait"), err, fwd.logFile())
		}
		time.Sleep(2 * time.Second)
	}
}

// kindCommands are the kind demo's subcommands.
var kindCommands = []*cli.Command{{
	Name:  "kind-gateway",
	Usage: "kind demo: forward a loopback port to the gateway Service (kubectl port-forward, started again when it stopped), wait until Polyaxon's API answers, print its URL",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "kubectl", Usage: "the kubectl to run"},
		&cli.StringFlag{Name: "namespace", Value: "polyaxon"},
		&cli.DurationFlag{Name: "wait", Value: 10 * time.Minute},
	},
	Action: kindGateway,
}, {
	Name:  "kind-https",
	Usage: "kind demo: forward a loopback port to the Gateway's data plane (Traefik's Service), wait until it answers https, print its URL, CA file, namespace, name and listener",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "kubectl", Usage: "the kubectl to run"},
		&cli.DurationFlag{Name: "wait", Value: 5 * time.Minute},
	},
	Action: kindHTTPS,
}}
