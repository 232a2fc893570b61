#!/usr/bin/env bash
# Builds promtool (Prometheus's rule checker and rule unit-test runner, which `make test` runs on
# the chart's alerts) from the Go module proxy into a cache outside the repository keyed by
# version. Prometheus's cloud service discoveries are left out (-tags remove_all_sd): promtool's
# rule commands need none of them, and they are most of the build. A cached binary is reused
# only when it reports the pinned version. A second run is a no-op.
#
# Usage: e2e/scripts/build-promtool.sh   (prints the binary's path on stdout)
set -euo pipefail

# Prometheus's Go module versions are v0.<3 digits of the release>.x (v0.316.0 is Prometheus 3.16).
PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/promtool-${PROMETHEUS_MODULE_VERSION}"

log() { echo "build-promtool: $*" >&2; }

# `promtool --version` prints "promtool, version v0.316.0 (branch: ...)".
cached_version() { "$BIN/promtool" --version 2>&1 | sed -n 's/^promtool, version \([^ ]*\).*/\1/p' | head -n1; }
if [ -x "$BIN/promtool" ] && [ "$(cached_version)" = "$PROMETHEUS_MODULE_VERSION" ]; then
  echo "$BIN/promtool"; exit 0
fi

log "building promtool of github.com/prometheus/prometheus $PROMETHEUS_MODULE_VERSION (a few minutes cold on 2 cores)"
. "$(dirname "$0")/gobuild.sh"
go_build_pinned github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" github.com/prometheus/prometheus/cmd/promtool "$BIN/promtool" \
  -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_MODULE_VERSION"
got="$(cached_version)"
if [ "$got" != "$PROMETHEUS_MODULE_VERSION" ]; then
  log "built promtool reports version '$got', want $PROMETHEUS_MODULE_VERSION"; exit 1
fi
log "built promtool $got"
echo "$BIN/promtool"
