#!/usr/bin/env bash
# Builds the two exporters the chart runs beside its stores (metrics.enabled), at the chart's
# tags, from the Go module proxy into a cache outside the repository keyed by version:
# postgres_exporter (github.com/prometheus-community/postgres_exporter) and redis_exporter
# (github.com/oliver006/redis_exporter; v1.80.0 is refused by the proxy, v1.88.0 is served).
# Each is built pinned to its version (gobuild.sh). A cached binary is reused when it reports
# its version.
#
# Usage: e2e/scripts/build-exporters.sh   (prints the directory holding both binaries)
set -euo pipefail

POSTGRES_EXPORTER_VERSION="${POSTGRES_EXPORTER_VERSION:-v0.17.1}"
REDIS_EXPORTER_VERSION="${REDIS_EXPORTER_VERSION:-v1.88.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/exporters-pg${POSTGRES_EXPORTER_VERSION}-redis${REDIS_EXPORTER_VERSION}"

log() { echo "build-exporters: $*" >&2; }

. "$(dirname "$0")/gobuild.sh"

# Both print their version on --version: "postgres_exporter, version v0.17.1 (...)" and
# "Redis Metrics Exporter v1.88.0 ...".
pg_ok() { "$BIN/postgres_exporter" --version 2>&1 | grep -q "version $POSTGRES_EXPORTER_VERSION "; }
redis_ok() { "$BIN/redis_exporter" --version 2>&1 | grep -q "$REDIS_EXPORTER_VERSION"; }

mkdir -p "$BIN"
if ! { [ -x "$BIN/postgres_exporter" ] && pg_ok; }; then
  log "building postgres_exporter $POSTGRES_EXPORTER_VERSION"
  go_build_pinned github.com/prometheus-community/postgres_exporter "$POSTGRES_EXPORTER_VERSION" \
    github.com/prometheus-community/postgres_exporter/cmd/postgres_exporter "$BIN/postgres_exporter" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$POSTGRES_EXPORTER_VERSION"
  pg_ok || { log "postgres_exporter does not report $POSTGRES_EXPORTER_VERSION"; exit 1; }
fi
if ! { [ -x "$BIN/redis_exporter" ] && redis_ok; }; then
  log "building redis_exporter $REDIS_EXPORTER_VERSION"
  go_build_pinned github.com/oliver006/redis_exporter "$REDIS_EXPORTER_VERSION" \
    github.com/oliver006/redis_exporter "$BIN/redis_exporter" -ldflags "-s -w -X main.BuildVersion=$REDIS_EXPORTER_VERSION"
  redis_ok || { log "redis_exporter does not report $REDIS_EXPORTER_VERSION"; exit 1; }
fi
echo "$BIN"
