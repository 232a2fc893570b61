#!/usr/bin/env bash
# Runs a make target as on a new machine: a fresh clone of HEAD, and every cache empty (Go's
# build and module caches, pip's, polyaxon-deploy's with the binaries, Polyaxon's virtual
# environments, kind's images and the private Docker engine's data root), all under one new
# directory. Debian's packages stay installed (apt is not undone). Prints the wall time, the CPU
# time of everything the target ran, and the load average sampled every 15 s.
#
# The private Docker engine of kind's images (build-kind-images.sh) listens on one socket: it is
# stopped before and after, so the run starts one on its own data root and the next warm run
# starts the usual one again.
#
# Usage: e2e/scripts/cold.sh TARGET [VAR=value...]
#   e2e/scripts/cold.sh demo; e2e/scripts/cold.sh demo E2E_PROVIDER=kind; e2e/scripts/cold.sh test
# COLD_DIR (default: a new directory under /var/tmp) holds the clone, the caches and load.log;
# it is kept, so that a second run of the same COLD_DIR measures the warm case. It takes about
# 17 GB after `demo`: remove it with `chmod -R u+w DIR && rm -rf DIR`.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 TARGET [VAR=value...]" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${COLD_DIR:-$(mktemp -d /var/tmp/polyaxon-deploy-cold.XXXXXX)}"
mkdir -p "$dir/cache" "$dir/gopath"
[ -d "$dir/repo/.git" ] || git clone -q "$repo" "$dir/repo"

export XDG_CACHE_HOME="$dir/cache" # polyaxon-deploy's cache, pip's, and Go's build cache
export GOPATH="$dir/gopath" GOMODCACHE="$dir/gopath/pkg/mod"
unset POLYAXON_DEPLOY_CACHE GOCACHE POLYAXON_DEPLOY_BIN_DIR

bash "$repo/e2e/scripts/build-kind-images.sh" stop 2>/dev/null || true

# The load average, sampled beside the run.
(while :; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 15; done) >"$dir/load.log" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true; bash "$dir/repo/e2e/scripts/build-kind-images.sh" stop 2>/dev/null || true' EXIT

start=$(date +%s)
code=0
TIMEFORMAT='cold: CPU %U s user, %S s system'
time (cd "$dir/repo" && make "$@") || code=$?
wall=$(($(date +%s) - start))
load="$(awk '{n++; s+=$2; if (n==1||$2<lo) lo=$2; if ($2>hi) hi=$2} END {if (n) printf "%.2f mean, %.2f-%.2f over %d samples", s/n, lo, hi, n}' "$dir/load.log")"
echo "cold: make $* exit $code in ${wall}s ($((wall / 60)) min $((wall % 60)) s); load average $load; caches in $dir"
exit "$code"
