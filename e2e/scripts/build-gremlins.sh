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
mkdir -p "$BIN"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A throw-away module pinning exactly this version (as build-trivy.sh does): `go install
# pkg@version` would also ask the proxy for the module's version list.
cd "$work"
go mod init local/gremlinsbuild >/dev/null 2>&1
echo "require github.com/go-gremlins/gremlins $GREMLINS_VERSION" >>go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/go-gremlins/gremlins/cmd/gremlins"\n' >tools.go
export GOFLAGS=-mod=mod CGO_ENABLED=0
go mod tidy >"$work/tidy.log" 2>&1 || { echo "build-gremlins: go mod tidy failed:" >&2; cat "$work/tidy.log" >&2; exit 1; }
go build -trimpath -ldflags "-s -w" -o "$BIN/gremlins.tmp" github.com/go-gremlins/gremlins/cmd/gremlins
mv "$BIN/gremlins.tmp" "$BIN/gremlins"
echo "build-gremlins: built $BIN/gremlins" >&2
echo "$BIN/gremlins"
