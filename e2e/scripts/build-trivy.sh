#!/usr/bin/env bash
# Builds the trivy scanner that `make scan` runs, from the Go module proxy, into a cache outside
# the repository keyed by version (next to the control-plane binaries). trivy v0.74 uses
# encoding/json/v2, hence GOEXPERIMENT=jsonv2. A cached binary is reused only when it reports the
# pinned version. A second run is a no-op.
#
# Usage: e2e/scripts/build-trivy.sh   (prints the binary's path on stdout)
set -euo pipefail

TRIVY_VERSION="${TRIVY_VERSION:-v0.74.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/trivy-${TRIVY_VERSION}"

log() { echo "build-trivy: $*" >&2; }

# `trivy version` prints "Version: 0.74.0"; a binary of another version (or a broken one) is rebuilt.
cached_version() { "$BIN/trivy" version 2>/dev/null | sed -n 's/^Version: *//p' | head -n1; }
if [ -x "$BIN/trivy" ] && [ "$(cached_version)" = "${TRIVY_VERSION#v}" ]; then
  echo "$BIN/trivy"; exit 0
fi

log "building trivy $TRIVY_VERSION (10-15 min cold on 2 cores)"
# trivy's go.mod has no replace directives: a module pinning it selects its own dependencies.
. "$(dirname "$0")/gobuild.sh"
# The version is set the way trivy's release build sets it (its goreleaser ldflags).
GOEXPERIMENT=jsonv2 go_build_pinned github.com/aquasecurity/trivy "$TRIVY_VERSION" github.com/aquasecurity/trivy/cmd/trivy "$BIN/trivy" \
  -ldflags "-s -w -X github.com/aquasecurity/trivy/pkg/version/app.ver=${TRIVY_VERSION#v}"
got="$(cached_version)"
if [ "$got" != "${TRIVY_VERSION#v}" ]; then
  log "built trivy reports version '$got', want ${TRIVY_VERSION#v}"; exit 1
fi
log "built trivy $got"
echo "$BIN/trivy"
