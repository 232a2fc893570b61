#!/usr/bin/env bash
# Builds the control-plane binaries the local e2e provider runs (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok, kwokctl) from the Go module
# proxy, into a cache outside the repository keyed by version. A second run is a no-op.
#
# Usage: e2e/scripts/build-binaries.sh   (prints the binary directory on stdout)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"

want=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok kwokctl)
missing=()
for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi

log() { echo "build-binaries: $*" >&2; }
mkdir -p "$BIN"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${KUBE_VERSION#v1.}"

# Kubernetes: a throw-away module that requires k8s.io/kubernetes and replaces every
# staging module (listed in kubernetes' own go.mod) with its published v0.Y.Z release.
if [[ " ${missing[*]} " =~ kube- ]]; then
  log "building Kubernetes $KUBE_VERSION components (about 13 min cold on 2 cores)"
  mkdir -p "$work/kube" && cd "$work/kube"
  go mod init local/kubebuild >/dev/null 2>&1
  gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" |
      awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
  } >>go.mod
  printf 'package tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' >tools.go
  sed -i 's/^package tools/\/\/go:build tools\n\npackage tools/' tools.go
  GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
  pkg=k8s.io/component-base/version
  ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
    log "built $c"
  done
fi

if [[ " ${missing[*]} " =~ " etcd " ]]; then
  log "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init local/etcdbuild >/dev/null 2>&1
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
  go mod tidy >/dev/null 2>&1
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .
  log "built etcd"
fi

if [[ " ${missing[*]} " =~ kwok ]]; then
  log "installing kwok/kwokctl $KWOK_VERSION"
  GOBIN="$BIN" CGO_ENABLED=0 go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi

echo "$BIN"
