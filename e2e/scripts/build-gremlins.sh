#!/usr/bin/env bash
# Builds the gremlins mutation tester that `make mutate` runs, from the Go module proxy, into a
# cache outside the repository keyed by version (next to the control-plane binaries). A cached
# binary is reused; a second run is a no-op.
#
# Usage: e2e/scripts/build-gremlins.sh   (prints the binary's path on stdout)
set -euo pipefail

GREMLINS_VERSION="${GREMLINS_VERSION:-v0.6.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/gremlins-${GREMLINS_VERSION}"

if [ -x "$BIN/gremlins" ]; then echo "$BIN/gremlins"; exit 0; fi

echo "build-gremlins: building gremlins $GREMLINS_VERSION (about a minute)" >&2
. "$(dirname "$0")/gobuild.sh"
go_build_pinned github.com/go-gremlins/gremlins "$GREMLINS_VERSION" github.com/go-gremlins/gremlins/cmd/gremlins "$BIN/gremlins" -ldflags "-s -w"
echo "build-gremlins: built $BIN/gremlins" >&2
echo "$BIN/gremlins"
