#!/usr/bin/env bash
# Builds Dex (an OpenID Connect provider) from the Go module proxy into a cache outside the
# repository, for the e2e of the authenticating edge's OIDC login (issue 42): a real issuer the
# edge discovers, whose keys sign the ID tokens the edge checks.
#
# Version: Dex v2.45.1. Dex's go.mod declares github.com/dexidp/dex without a /v2 suffix, so the
# module proxy serves its v2 tags only as pseudo-versions of v0.0.0 (the tag's commit and commit
# time); it refuses branch and bare-commit queries. Its go.mod also replaces
# github.com/dexidp/dex/api/v2 with ./api/v2, a nested module the module's zip leaves out, so
# `go install module@version` refuses it: the build copies the module, drops that replace (the
# proxy serves api/v2 as a module of its own) and builds cmd/dex there. Without cgo, the SQLite
# storage is left out; the e2e uses Dex's memory storage. A second run is a no-op.
#
# Usage: e2e/scripts/build-dex.sh
# Prints the binary's path on stdout.
set -euo pipefail

VERSION="${DEX_VERSION:-v0.0.0-20260303133905-11d2eeb52b42}" # tag v2.45.1
MODULE=github.com/dexidp/dex
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/dex-$VERSION"

log() { echo "build-dex: $*" >&2; }

if [ ! -x "$BIN/dex" ]; then
  log "building $MODULE $VERSION (about 2 min cold on 2 cores, module downloads included)"
  # Outside any module, so the repository's go.mod is neither read nor changed.
  dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [ -f "$dir/go.mod" ] || { log "the module proxy gave no $MODULE@$VERSION"; exit 1; }
  src="$(mktemp -d)"
  trap 'rm -rf "$src"' EXIT
  cp -r "$dir/." "$src"
  chmod -R u+w "$src"
  (cd "$src" && go mod edit -dropreplace "$MODULE/api/v2" &&
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X main.version=v2.45.1" -o "$BIN/dex.tmp" ./cmd/dex)
  mv "$BIN/dex.tmp" "$BIN/dex"
  log "built $BIN/dex"
fi
echo "$BIN/dex"
