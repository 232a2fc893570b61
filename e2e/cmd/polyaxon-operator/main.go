// Command polyaxon-operator is the e2e tests' stand-in for Polyaxon's operator (see package
// e2e/operator): it reads the operator pod's environment (the chart's operator ConfigMap) and
// KUBECONFIG, reconciles Polyaxon's custom resources, and stops cleanly on SIGTERM.
//
//	go build -o bin/polyaxon-operator ./e2e/cmd/polyaxon-operator
//	KUBECONFIG=... POLYAXON_K8S_NAMESPACE=polyaxon POLYAXON_SINGLE_NAMESPACE=true \
//	POLYAXON_SET_AGENT=true POLYAXON_PROXY_API_HOST=127.0.0.1 POLYAXON_PROXY_API_PORT=8000 \
//	bin/polyaxon-operator
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/dynamic"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/operator"
)

func main() {
	os.Exit(run())
}

func run() int {
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
	if err := operator.New(cfg, dyn, log).Run(ctx); err != nil {
		log.Error("operator stopped", "err", err)
		return 1
	}
	return 0
}
