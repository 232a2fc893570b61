#!/usr/bin/env bash
# Builds cosign (Sigstore's signing CLI, which `make test` runs to verify a release's blob
# signatures and the chart's signature in the e2e's OCI registry) from the Go module proxy into
# a cache outside the repository keyed by version. A cached binary is reused only when it
# reports the pinned version. A second run is a no-op.
#
# Usage: e2e/scripts/build-cosign.sh   (prints the binary's path on stdout)
set -euo pipefail

COSIGN_VERSION="${COSIGN_VERSION:-v2.6.1}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/cosign-${COSIGN_VERSION}"

log() { echo "build-cosign: $*" >&2; }

# `cosign version --json` prints {"gitVersion": "v2.6.1", ...}; release-utils reads the version
# from the -X below.
cached_version() { "$BIN/cosign" version --json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n1; }
if [ -x "$BIN/cosign" ] && [ "$(cached_version)" = "$COSIGN_VERSION" ]; then
  echo "$BIN/cosign"; exit 0
fi

log "building cosign $COSIGN_VERSION from github.com/sigstore/cosign/v2 (several minutes cold on 2 cores)"
. "$(dirname "$0")/gobuild.sh"
go_build_pinned github.com/sigstore/cosign/v2 "$COSIGN_VERSION" github.com/sigstore/cosign/v2/cmd/cosign "$BIN/cosign" \
  -ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION"
got="$(cached_version)"
if [ "$got" != "$COSIGN_VERSION" ]; then
  log "built cosign reports version '$got', want $COSIGN_VERSION"; exit 1
fi
log "built cosign $got"
echo "$BIN/cosign"
