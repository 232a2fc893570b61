#!/usr/bin/env bash
# Builds the monitoring the kind scenario runs against the chart's metrics, from the Go module
# proxy into a cache outside the repository keyed by version: the Prometheus server (only its
# Kubernetes service discovery compiled in: -tags remove_all_sd,enable_kubernetes_sd) and
# kube-state-metrics, which the chart's alerts on the API, the agent and Pending pods read.
# Each is built pinned to its version (gobuild.sh). A second run is a no-op.
#
# The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule, ...) come from its module's
# example/prometheus-operator-crd at v0.85.0, the newest version the proxy serves (v0.86.0 and
# v0.87.0 are refused, checked 2026-11-29).
#
# Usage: e2e/scripts/build-monitoring.sh
# Prints two lines: the directory holding both binaries, then the directory of the CRDs.
set -euo pipefail

PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}" # as build-promtool.sh's
KSM_VERSION="${KSM_VERSION:-v2.20.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/monitoring-prometheus${PROMETHEUS_MODULE_VERSION}-ksm${KSM_VERSION}"

log() { echo "build-monitoring: $*" >&2; }

# reports NAME VERSION: the cached program says it is VERSION (kube-state-metrics has a
# `version` command, Prometheus a --version flag).
reports() {
  local said
  said="$({ "$BIN/$1" --version; "$BIN/$1" version; } 2>&1 || true)"
  grep -q "version $2 " <<<"$said"
}

. "$(dirname "$0")/gobuild.sh"

# build NAME MODULE VERSION PACKAGE TAGS: one program into $BIN/NAME, its version stamped as
# Prometheus's libraries read it (prometheus/common/version).
build() {
  local name="$1" module="$2" version="$3" pkg="$4" tags="$5"
  [ -x "$BIN/$name" ] && reports "$name" "$version" && return 0
  log "building $name ($module $version)"
  go_build_pinned "$module" "$version" "$pkg" "$BIN/$name" -tags "$tags" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version"
  reports "$name" "$version" || { log "$name does not report $version"; exit 1; }
}

mkdir -p "$BIN"
build prometheus github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" \
  github.com/prometheus/prometheus/cmd/prometheus remove_all_sd,enable_kubernetes_sd
build kube-state-metrics k8s.io/kube-state-metrics/v2 "$KSM_VERSION" k8s.io/kube-state-metrics/v2 ""
echo "$BIN"
# Outside any module, so the repository's go.mod is neither read nor changed.
crds="$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/example/prometheus-operator-crd"
[ -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ] || { log "no ServiceMonitor CRD in $crds"; exit 1; }
echo "$crds"
