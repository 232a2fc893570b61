package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/gatewayapi"
)

// The demo's Gateway (local provider): Traefik, run by the hosts daemon (it needs the pod
// network proxy of the daemon's host programs: gatewayapi.Start), with the Gateway API
// CRDs and an HTTPS listener whose certificate is made when the daemon starts. The daemon
// writes gatewayFile once the Gateway is Programmed: its URL, the CA's file, the Gateway's
// namespace, name and listener, a line each.
func gatewayFile(addressFile string) string {
	return filepath.Join(filepath.Dir(addressFile), "gateway-https")
}

// runGateway installs the CRDs, starts Traefik and writes file; Traefik stops with ctx.
func runGateway(ctx context.Context, cl *cluster.Cluster, file string) {
	_ = os.Remove(file)
	build, err := gatewayapi.EnsureBuild(ctx, os.Stderr)
	if err != nil {
		logf("the Gateway: %v", err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := gatewayapi.InstallCRDs(sctx, cl, build.CRDs); err != nil {
		logf("the Gateway API CRDs: %v", err)
		return
	}
	gw, err := gatewayapi.Start(sctx, cl, build.Traefik, gatewayapi.Options{})
	if err != nil {
		logf("the Gateway: %v", err)
		return
	}
	info := strings.Join([]string{gw.URL(), gw.CAFile, gw.Namespace, gw.Name, gw.Listener}, "\n") + "\n"
	if err := os.WriteFile(file+".tmp", []byte(info), 0o644); err == nil {
		err = os.Rename(file+".tmp", file)
	}
	if err != nil {
		logf("write %s: %v", file, err)
	}
	logf("Gateway %s/%s (Traefik, log %s) answers at %s", gw.Namespace, gw.Name, gw.LogPath, gw.URL())
	<-ctx.Done()
	gw.Stop()
	_ = os.Remove(file)
}

// gatewayHTTPS waits until the hosts daemon's Gateway is Programmed and prints what
// gatewayFile holds.
func gatewayHTTPS(c *cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	if s.Hosts == nil {
		return fmt.Errorf("the %s demo runs no Gateway on this machine", s.Provider)
	}
	file := gatewayFile(s.Hosts.AddressFile)
	deadline := time.Now().Add(c.Duration("wait"))
	for {
		if !hostsAlive(s.Hosts) {
			return fmt.Errorf("the hosts daemon is not running (`make demo` starts it again):\n%s", tail(s.Hosts.Log, 15))
		}
		if b, err := os.ReadFile(file); err == nil {
			fmt.Print(string(b))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the demo's Gateway is not Programmed after %s (log: %s):\n%s", c.Duration("wait"), s.Hosts.Log, tail(s.Hosts.Log, 15))
		}
		select {
		case <-c.Context.Done():
			return c.Context.Err()
		case <-time.After(time.Second):
		}
	}
}
