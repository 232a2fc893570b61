// Command polyaxon-operator is the e2e tests' stand-in for Polyaxon's operator (see package
// e2e/operator): it reads the operator pod's environment (the chart's operator ConfigMap) and
// KUBECONFIG, reconciles Polyaxon's custom resources, and stops cleanly on SIGTERM. With
// --metrics-bind-address (the chart passes it with metrics.enabled, as mloperator takes it) it
// serves Prometheus metrics there, the Go runtime's and the process's: enough for a scrape to
// find the operator up.
//
//	go build -o bin/polyaxon-operator ./e2e/cmd/polyaxon-operator
//	KUBECONFIG=... POLYAXON_K8S_NAMESPACE=polyaxon POLYAXON_SINGLE_NAMESPACE=true \
//	POLYAXON_SET_AGENT=true POLYAXON_PROXY_API_HOST=127.0.0.1 POLYAXON_PROXY_API_PORT=8000 \
//	bin/polyaxon-operator
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/operator"
)

func main() {
	os.Exit(run())
}

func run() int {
	flags := flag.NewFlagSet("polyaxon-operator", flag.ContinueOnError)
	metricsAddr := flags.String("metrics-bind-address", "", "where to serve Prometheus metrics (empty: nowhere)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		return 2
	}
	cfg, warnings, err := operator.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "polyaxon-operator: invalid configuration:\n%v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	for _, w := range warnings {
		log.Warn(w)
	}
	rest, err := operator.RESTConfig(os.Getenv("KUBECONFIG"))
	if err != nil {
		log.Error("no cluster to talk to", "err", err)
		return 1
	}
	rest.UserAgent = "polyaxon-operator-standin"
	dyn, err := dynamic.NewForConfig(rest)
	if err != nil {
		log.Error("client", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *metricsAddr != "" {
		srv := &http.Server{Addr: *metricsAddr, Handler: promhttp.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		defer srv.Close()
	}
	if err := operator.New(cfg, dyn, log).Run(ctx); err != nil {
		log.Error("operator stopped", "err", err)
		return 1
	}
	return 0
}
