#!/usr/bin/env bash
# Builds Kubernetes' binaries (the control plane, kubectl, and the kubelet, kubeadm and
# kube-proxy of kind's node image), etcd, kwok and kwokctl from the Go module proxy, into a
# cache outside the repository keyed by version, and copies kwok's default Stage documents
# next to them (kwok-stages/). The local e2e provider runs them; build-kind-images.sh puts
# the same files in kind's images, so a version of Kubernetes is compiled once for both. A
# second run is a no-op.
#
# Usage: e2e/scripts/build-binaries.sh   (prints the binary directory on stdout)
set -euo pipefail

# shellcheck source=versions.sh
. "$(dirname "$0")/versions.sh"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
BIN="$CACHE/bin/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"

kube=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy)
# kwokctl's defaults (the "fast" pod stages, lease heartbeats), paths inside the kwok module.
stage_src=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)
missing=()
for b in "${kube[@]}" etcd kwok kwokctl; do [ -x "$BIN/$b" ] || missing+=("$b"); done
for s in "${stage_src[@]}"; do [ -s "$BIN/kwok-stages/${s##*/}" ] || missing+=("kwok-stages"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
has() { [[ " ${missing[*]} " == *" $1 "* ]]; }

log() { echo "build-binaries: $*" >&2; }
mkdir -p "$BIN"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${KUBE_VERSION#v1.}"

# Kubernetes: a throw-away module that requires k8s.io/kubernetes and replaces every
# staging module (listed in kubernetes' own go.mod) with its published v0.Y.Z release.
todo=()
for c in "${kube[@]}"; do has "$c" && todo+=("$c"); done
if [ ${#todo[@]} -gt 0 ]; then
  log "building Kubernetes $KUBE_VERSION ${todo[*]} (about 15 min cold on 2 cores)"
  mkdir -p "$work/kube" && cd "$work/kube"
  go mod init local/kubebuild >/dev/null 2>&1
  gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" |
      awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
  } >>go.mod
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${todo[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } >tools.go
  GOFLAGS=-mod=mod go mod tidy >"$work/tidy.log" 2>&1 || { log "go mod tidy failed:"; cat "$work/tidy.log" >&2; }
  pkg=k8s.io/component-base/version
  ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  # One invocation for every binary: the packages they share compile once, the links run side
  # by side.
  pkgs=()
  for c in "${todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${pkgs[@]}"
  log "built ${todo[*]}"
fi

if has etcd; then
  log "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init local/etcdbuild >/dev/null 2>&1
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
  go mod tidy >/dev/null 2>&1
  CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .
  log "built etcd"
fi

if has kwok || has kwokctl; then
  log "installing kwok/kwokctl $KWOK_VERSION"
  GOBIN="$BIN" CGO_ENABLED=0 go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi

# kwokctl writes its default stages only when a config has no Stage; the local provider adds
# its own stages, so it needs kwok's defaults as files. They ship in the kwok module.
if has kwok-stages; then
  cd "$work"
  src="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  mkdir -p "$BIN/kwok-stages"
  for s in "${stage_src[@]}"; do
    cp "$src/kustomize/stage/$s" "$BIN/kwok-stages/${s##*/}"
  done
  log "copied kwok default stages"
fi

echo "$BIN"
