#!/usr/bin/env bash
# Builds Traefik (the Gateway API controller and data plane of the e2e and the demo) from the Go
# module proxy into a cache outside the repository keyed by version, and fetches the Gateway API
# CRDs (standard channel) of the version Traefik's go.mod requires, from the same proxy.
#
# Version: v3.6.12, the newest v3.6 (Gateway API v1.4.0). v3.7.13 (Gateway API v1.6.1) does not
# build from the proxy this project reaches: it answers 403 for modules it needs (Traefik's fork
# github.com/containous/go-http-auth at the version v3.7 replaces with, and a dozen DNS SDKs that
# lego v5's DNS providers import), checked 2026-11-27.
#
# Traefik's go.mod has replace directives (its forks of go-http-auth and gorilla/mux; from v3.7
# also github.com/traefik/traefik/dynamic/ext => ./pkg/config/dynamic/ext), so `go install
# module@version` refuses it. We copy the module's source into the cache and `go build
# ./cmd/traefik` there. When go.mod names that extension module, which a module zip leaves out
# (a nested module) and the proxy does not serve, we write it as it stands with no extension
# compiled in: two empty structs, ext.HTTP and ext.Router, embedded inline in the dynamic
# configuration. The web UI's embedded directory (webui/static) is in the zip with only a
# placeholder file: the dashboard is empty, and nothing here uses it. A second run is a no-op.
#
# $POLYAXON_DEPLOY_TRAEFIK, when set, names a Traefik binary built so: it is used as it is (the
# README demo test gives the demo, which runs in a home of its own, the suite's build).
#
# Usage: e2e/scripts/build-traefik.sh
# Prints two lines on stdout: the binary's path, then the directory of the standard channel's
# CRDs (config/crd/standard in the gateway-api module cache).
set -euo pipefail

VERSION="${TRAEFIK_VERSION:-v3.6.12}"
MODULE=github.com/traefik/traefik/v3
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/traefik-$VERSION"
if [ -n "${POLYAXON_DEPLOY_TRAEFIK:-}" ]; then
  [ -x "$POLYAXON_DEPLOY_TRAEFIK" ] || { echo "build-traefik: POLYAXON_DEPLOY_TRAEFIK=$POLYAXON_DEPLOY_TRAEFIK is not an executable" >&2; exit 1; }
  BIN="$(dirname "$POLYAXON_DEPLOY_TRAEFIK")"
  [ "$(basename "$POLYAXON_DEPLOY_TRAEFIK")" = traefik ] || { echo "build-traefik: POLYAXON_DEPLOY_TRAEFIK must name a file called traefik" >&2; exit 1; }
fi

log() { echo "build-traefik: $*" >&2; }
# Outside any module, so the repository's go.mod is neither read nor changed.
moddir() { (cd / && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); }

if [ ! -x "$BIN/traefik" ]; then
  log "building $MODULE $VERSION (several minutes cold on 2 cores, module downloads included)"
  src="$(moddir "$MODULE@$VERSION")"
  [ -d "$src/cmd/traefik" ] || { log "no cmd/traefik in $src"; exit 1; }
  work="$CACHE/src/traefik-$VERSION"
  rm -rf "$work"; mkdir -p "$work"
  cp -R "$src/." "$work/"; chmod -R u+w "$work"
  ext="$work/pkg/config/dynamic/ext"
  if grep -q '^replace github.com/traefik/traefik/dynamic/ext => ./pkg/config/dynamic/ext' "$work/go.mod" && [ ! -f "$ext/go.mod" ]; then
    mkdir -p "$ext"
    printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24\n' >"$ext/go.mod"
    cat >"$ext/ext.go" <<'GO'
// Package ext is the dynamic configuration's extension point, empty when nothing extends it.
package ext

// HTTP is embedded in the HTTP configuration.
type HTTP struct{}

// Router is embedded in a router's configuration.
type Router struct{}
GO
  fi
  mkdir -p "$BIN"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$VERSION" -o "$BIN/traefik.tmp" ./cmd/traefik)
  mv "$BIN/traefik.tmp" "$BIN/traefik"
  rm -rf "$work"
  log "built $BIN/traefik"
fi

# The Gateway API version Traefik is built against, so CRDs and controller agree.
gwv="$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' | xargs grep -E '^\s*sigs.k8s.io/gateway-api v' | awk '{print $2}')"
[ -n "$gwv" ] || { log "no sigs.k8s.io/gateway-api in $MODULE@$VERSION's go.mod"; exit 1; }
crds="$(moddir "sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION:-$gwv}")/config/crd/standard"
[ -d "$crds" ] || { log "no CRDs in $crds"; exit 1; }
echo "$BIN/traefik"
echo "$crds"
