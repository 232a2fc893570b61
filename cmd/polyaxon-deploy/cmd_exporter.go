package main

// The exporter: what polyaxon-deploy knows of a release, as Prometheus metrics, served from
// inside the cluster (the chart's metrics.installer) or from any machine with a kubeconfig.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/exporter"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
)

const (
	flagListen       = "listen"
	flagScrapeBudget = "scrape-timeout"
	// exporterPort is the chart's metrics.installer port.
	exporterPort = 9150
)

func exporterCommand() *cli.Command {
	return &cli.Command{
		Name:  "exporter",
		Usage: "serve the release's last backup and upgrade, and the state of its run guards, as Prometheus metrics",
		UsageText: "polyaxon-deploy exporter [--listen ADDR] [-n NS] [--release NAME]\n\n" +
			"Runs until interrupted. The chart runs it with metrics.installer.enabled; docs/metrics.md lists the metrics.",
		Flags: joinFlags(clusterFlags(), []cli.Flag{
			&cli.StringFlag{Name: flagListen, Value: fmt.Sprintf(":%d", exporterPort), Usage: "address to serve /metrics and /healthz on"},
			&cli.DurationFlag{Name: flagScrapeBudget, Value: 10 * time.Second, Usage: "longest a scrape reads the cluster"},
		}),
		Action: runExporter,
	}
}

func runExporter(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	ks := kubeSettings(c)
	cs, err := ks.Clientset()
	if err != nil {
		return err
	}
	dyn, err := ks.Dynamic()
	if err != nil {
		return err
	}
	mapper, err := ks.RESTMapper()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(envOf(c).stderr, nil))
	col := &exporter.Collector{
		Facts:   facts.Store{Kube: cs, Namespace: c.String(flagNamespace), Release: c.String(flagRelease)},
		Guards:  guards.Client{Dynamic: dyn, Mapper: mapper, FieldManager: "polyaxon-deploy"},
		Timeout: c.Duration(flagScrapeBudget),
		Log:     log,
	}
	ln, err := net.Listen("tcp", c.String(flagListen))
	if err != nil {
		return withExit(ExitUsage, fmt.Errorf("--%s: %w", flagListen, err))
	}
	srv := &http.Server{Handler: exporter.Handler(col), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := commandContext(c)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("serving metrics", "address", ln.Addr().String(), "namespace", col.Facts.Namespace, "release", col.Facts.Release)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
