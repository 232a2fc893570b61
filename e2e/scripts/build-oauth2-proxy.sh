#!/usr/bin/env bash
# Builds oauth2-proxy (the authenticating edge of the chart, issue 42) from the Go module proxy
# into a cache outside the repository keyed by version, for the e2e on the local provider, which
# runs it as a host process in place of the image quay.io/oauth2-proxy/oauth2-proxy.
#
# Version: v7.15.6, the tag the chart pins (edge.image.tag in charts/polyaxon/values.yaml): the
# program the e2e runs is the one production pulls. Its go.mod has no replace directive, so
# `go install module@version` builds it; it needs Go 1.26. A second run is a no-op.
#
# $POLYAXON_DEPLOY_OAUTH2_PROXY, when set, names an oauth2-proxy binary built so: it is used as
# it is.
#
# Usage: e2e/scripts/build-oauth2-proxy.sh
# Prints the binary's path on stdout.
set -euo pipefail

VERSION="${OAUTH2_PROXY_VERSION:-v7.15.6}"
MODULE=github.com/oauth2-proxy/oauth2-proxy/v7
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/oauth2-proxy-$VERSION"

log() { echo "build-oauth2-proxy: $*" >&2; }

if [ -n "${POLYAXON_DEPLOY_OAUTH2_PROXY:-}" ]; then
  [ -x "$POLYAXON_DEPLOY_OAUTH2_PROXY" ] || { log "POLYAXON_DEPLOY_OAUTH2_PROXY=$POLYAXON_DEPLOY_OAUTH2_PROXY is not an executable"; exit 1; }
  echo "$POLYAXON_DEPLOY_OAUTH2_PROXY"
  exit 0
fi

if [ ! -x "$BIN/oauth2-proxy" ]; then
  log "building $MODULE $VERSION (a few minutes cold on 2 cores, module downloads included)"
  mkdir -p "$BIN"
  # Outside any module, so the repository's go.mod is neither read nor changed.
  (cd / && CGO_ENABLED=0 GOBIN="$BIN/tmp" go install -trimpath \
    -ldflags "-s -w -X $MODULE/pkg/version.VERSION=$VERSION" "$MODULE@$VERSION")
  mv "$BIN/tmp/oauth2-proxy" "$BIN/oauth2-proxy"
  rmdir "$BIN/tmp"
  log "built $BIN/oauth2-proxy"
fi
echo "$BIN/oauth2-proxy"
