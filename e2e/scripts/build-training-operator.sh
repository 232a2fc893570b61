#!/usr/bin/env bash
# Builds the Kubeflow training operator's manager (cmd/training-operator.v1) from the Go module
# proxy into a cache outside the repository keyed by version, as build-binaries.sh builds the
# control plane. The module builds standalone (its go.mod has no replace directive), so this is
# `go install module/cmd@version`. A second run is a no-op. The e2e scenarios that need the
# operator run this; nothing else does.
#
# Usage: e2e/scripts/build-training-operator.sh
# Prints two lines on stdout: the binary's path, then the directory of the operator's CRDs
# (manifests/base/crds in the module cache: kubeflow.org_{pytorch,tf,mpi,...}jobs.yaml).
set -euo pipefail

VERSION="${TRAINING_OPERATOR_VERSION:-v1.8.1}"
MODULE=github.com/kubeflow/training-operator
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/training-operator-$VERSION"

log() { echo "build-training-operator: $*" >&2; }
if [ ! -x "$BIN/training-operator.v1" ]; then
  log "building $MODULE $VERSION (about 6 min cold on 2 cores, module downloads included)"
  mkdir -p "$BIN"
  GOBIN="$BIN" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "$MODULE/cmd/training-operator.v1@$VERSION"
  log "built $BIN/training-operator.v1"
fi
# Outside any module, so the repository's go.mod is neither read nor changed.
dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
[ -d "$dir/manifests/base/crds" ] || { log "no CRDs in $dir/manifests/base/crds"; exit 1; }
echo "$BIN/training-operator.v1"
echo "$dir/manifests/base/crds"
