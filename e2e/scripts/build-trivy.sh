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
mkdir -p "$BIN"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Not `go install ...@version`: that also asks the proxy for trivy's version list (to report
# deprecations), which the proxy refuses for trivy. A throw-away module that requires exactly
# this version selects the same dependency versions (trivy's go.mod has no replace directives).
cd "$work"
go mod init local/trivybuild >/dev/null 2>&1
echo "require github.com/aquasecurity/trivy $TRIVY_VERSION" >>go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/aquasecurity/trivy/cmd/trivy"\n' >tools.go
export GOEXPERIMENT=jsonv2 GOFLAGS=-mod=mod CGO_ENABLED=0
go mod tidy >"$work/tidy.log" 2>&1 || { log "go mod tidy failed:"; cat "$work/tidy.log" >&2; exit 1; }
# The version is set the way trivy's release build sets it (its goreleaser ldflags).
go build -trimpath -ldflags "-s -w -X github.com/aquasecurity/trivy/pkg/version/app.ver=${TRIVY_VERSION#v}" \
  -o "$BIN/trivy" github.com/aquasecurity/trivy/cmd/trivy
got="$(cached_version)"
if [ "$got" != "${TRIVY_VERSION#v}" ]; then
  log "built trivy reports version '$got', want ${TRIVY_VERSION#v}"; exit 1
fi
log "built trivy $got"
echo "$BIN/trivy"
