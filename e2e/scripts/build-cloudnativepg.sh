#!/usr/bin/env bash
# Builds CloudNativePG's manager (cmd/manager: the operator's `controller`, and the `bootstrap`,
# `instance`, `backup` commands its init container copies into every Postgres pod) from the Go
# module proxy into a cache outside the repository keyed by version, with gobuild.sh's
# go_build_pinned: `go install .../cmd/manager@v1.28.0` fails here, the proxy refusing the
# module's version list. A cached binary is reused only when `manager version` reports the
# pinned version. A second run is a no-op. Only what asks for CloudNativePG runs this
# (build-kind-images.sh cloudnativepg, the add-on e2e/cluster/addons/cloudnativepg); make test
# does not.
# Measured on 2 cores shared with another engineer's tests (2026-11-30, load average about 5):
# 2 min 17 s with the modules already downloaded and none of the module's packages in Go's
# build cache; 0.04 s with the binary cached. The binary (-s -w) is 64.5 MB.
#
# Usage: e2e/scripts/build-cloudnativepg.sh [--crds]
# Prints two lines on stdout: the manager's path, then the module's directory in Go's module
# cache (config/crd/bases/postgresql.cnpg.io_*.yaml: the 10 CRDs; releases/cnpg-<version>.yaml:
# the operator's release manifest). With --crds, only the module's directory, without building.
set -euo pipefail

CLOUDNATIVEPG_VERSION="${CLOUDNATIVEPG_VERSION:-v1.28.0}"
MODULE=github.com/cloudnative-pg/cloudnative-pg
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/cloudnativepg-$CLOUDNATIVEPG_VERSION"

log() { echo "build-cloudnativepg: $*" >&2; }

# moddir: the module's directory (downloaded once). Outside any module, so the repository's
# go.mod is neither read nor changed.
moddir() {
  local dir
  dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$CLOUDNATIVEPG_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [ -f "$dir/releases/cnpg-${CLOUDNATIVEPG_VERSION#v}.yaml" ] || { log "no releases/cnpg-${CLOUDNATIVEPG_VERSION#v}.yaml in '$dir'"; exit 1; }
  ls "$dir"/config/crd/bases/postgresql.cnpg.io_*.yaml >/dev/null 2>&1 || { log "no CRDs in $dir/config/crd/bases"; exit 1; }
  echo "$dir"
}

if [ "${1:-}" = --crds ]; then
  moddir; exit 0
fi

# `manager version` prints "Build: {Version:1.28.0 Commit:<sha> Date:<date>}" (the fields of
# pkg/versions.Info, which the -X flags below set, as the project's goreleaser does).
cached_version() { "$BIN/manager" version 2>/dev/null | sed -n 's/^Build: {Version:\([^ ]*\) .*/\1/p' | head -n1; }
if ! { [ -x "$BIN/manager" ] && [ "$(cached_version)" = "${CLOUDNATIVEPG_VERSION#v}" ]; }; then
  log "building $MODULE $CLOUDNATIVEPG_VERSION cmd/manager (about a minute and a half on 2 cores, modules downloaded)"
  . "$(dirname "$0")/gobuild.sh"
  # The commit and time the module proxy recorded for the version (its .info file).
  info="$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$CLOUDNATIVEPG_VERSION" | sed -n 's/.*"Info": "\(.*\)".*/\1/p')"
  commit="$(sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$info")"
  date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")"
  pv=github.com/cloudnative-pg/cloudnative-pg/pkg/versions
  go_build_pinned "$MODULE" "$CLOUDNATIVEPG_VERSION" "$MODULE/cmd/manager" "$BIN/manager" \
    -ldflags "-s -w -X $pv.buildVersion=${CLOUDNATIVEPG_VERSION#v} -X $pv.buildCommit=${commit:-none} -X $pv.buildDate=${date:-unknown}"
  got="$(cached_version)"
  if [ "$got" != "${CLOUDNATIVEPG_VERSION#v}" ]; then
    log "built manager reports version '$got', want ${CLOUDNATIVEPG_VERSION#v}"; exit 1
  fi
  log "built $BIN/manager ($got)"
fi
echo "$BIN/manager"
moddir
