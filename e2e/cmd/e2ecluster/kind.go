package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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
func kindProvider(ctx context.Context) (*cluster.KindProvider, error) {
	if os.Getenv("DOCKER_HOST") == "" {
		if err := os.Setenv("DOCKER_HOST", cluster.KindOfflineDockerHost); err != nil {
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
	return cluster.NewKindOfflineProvider(ctx, cluster.WithKindNodeMounts(kindv1alpha4.Mount{HostPath: dir, ContainerPath: kindArtifactsPath}))
}

// loadKindImages loads images into the nodes: run images into the experiments and builds
// pools, the rest into the core pool.
func loadKindImages(ctx context.Context, p *cluster.KindProvider, c *cluster.Cluster, images []string) error {
	start := time.Now()
	sets := cluster.KindImagesByPool(images)
	if err := p.LoadImages(ctx, c, sets...); err != nil {
		return err
	}
	for _, set := range sets {
		fmt.Fprintf(os.Stderr, "loaded %s into the nodes of %s\n", strings.Join(set.Images, ", "), strings.Join(set.Pools, ", "))
	}
	fmt.Fprintf(os.Stderr, "images loaded in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func kindForwardPIDFile() string  { return filepath.Join(demoDir(), "kind-forward.pid") }
func kindForwardAddrFile() string { return filepath.Join(demoDir(), "kind-forward-address") }

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
		addr, alive := kindForwardRunning()
		if !alive {
			if addr, err = startKindForward(c.String("kubectl"), s.Kubeconfig, c.String("namespace")); err != nil {
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
				c.String("namespace"), gatewayService, c.Duration("wait"), last, filepath.Join(demoDir(), "kind-forward.log"))
		case <-time.After(2 * time.Second):
		}
	}
}

// kindForwardRunning is the port-forward's address and whether its process is alive.
func kindForwardRunning() (string, bool) {
	b, err := os.ReadFile(kindForwardPIDFile())
	if err != nil {
		return "", false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return "", false
	}
	addr, err := os.ReadFile(kindForwardAddrFile())
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(addr)), true
}

func startKindForward(kubectl, kubeconfig, namespace string) (string, error) {
	if kubectl == "" {
		return "", errors.New("kind-gateway: --kubectl is required to start the port-forward")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.OpenFile(filepath.Join(demoDir(), "kind-forward.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", namespace, "port-forward",
		"--address", "127.0.0.1", "svc/"+gatewayService, fmt.Sprintf("%d:http", port))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command, as the demo does
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("kubectl port-forward: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.WriteFile(kindForwardAddrFile(), []byte(addr+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(kindForwardPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return "", err
	}
	_ = cmd.Process.Release()
	return addr, nil
}

// stopKindForward ends the demo's port-forward, if it runs.
func stopKindForward() {
	if b, err := os.ReadFile(kindForwardPIDFile()); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	_ = os.Remove(kindForwardPIDFile())
	_ = os.Remove(kindForwardAddrFile())
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
}}
