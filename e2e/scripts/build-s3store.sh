#!/usr/bin/env bash
# Builds versitygw (Versity S3 Gateway, a real S3 server whose POSIX backend keeps each object as
# a file under <data>/<bucket>/<key>; e2e/s3test runs it for the tests that need an S3 store) from
# the Go module proxy into a cache outside the repository keyed by version. A cached binary is
# reused only when it reports the pinned version. A second run is a no-op.
# Measured on 2 cores shared with other builds (2026-11-30): 1 min 26 s with Go's module and build
# caches empty (361 MB of modules downloaded), 63 s with the modules already downloaded; the
# binary is 44.6 MB, and two builds gave the same bytes.
#
# Usage: e2e/scripts/build-s3store.sh   (prints the binary's path on stdout)
set -euo pipefail

VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/versitygw-${VERSITYGW_VERSION}"

log() { echo "build-s3store: $*" >&2; }

# `versitygw --version` prints "Version  : v1.8.0" (then Build and BuildTime lines); the version
# comes from the -X below, as versitygw's own Makefile and goreleaser set it.
cached_version() { "$BIN/versitygw" --version 2>/dev/null | sed -n 's/^Version *: *\([^ ]*\).*/\1/p' | head -n1; }
if [ -x "$BIN/versitygw" ] && [ "$(cached_version)" = "$VERSITYGW_VERSION" ]; then
  echo "$BIN/versitygw"; exit 0
fi

log "building versitygw $VERSITYGW_VERSION from github.com/versity/versitygw (about a minute and a half cold on 2 cores)"
. "$(dirname "$0")/gobuild.sh"
go_build_pinned github.com/versity/versitygw "$VERSITYGW_VERSION" github.com/versity/versitygw/cmd/versitygw "$BIN/versitygw" \
  -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION"
got="$(cached_version)"
if [ "$got" != "$VERSITYGW_VERSION" ]; then
  log "built versitygw reports version '$got', want $VERSITYGW_VERSION"; exit 1
fi
log "built versitygw $got"
echo "$BIN/versitygw"
