#!/usr/bin/env bash
# Installs Polyaxon's own programs (haupt: the API; polyaxon: the agent and the CLI) into a
# virtual environment outside the repository, from the Python package index, every package
# pinned with its hash in e2e/polyaxon/requirements-<version>.txt. A second run is a no-op;
# a changed requirements file makes a new environment. Tests never install: they use this one.
#
# Usage: e2e/scripts/install-polyaxon.sh [VERSION]          prints the environment's directory
#        e2e/scripts/install-polyaxon.sh --all              every version pinned under e2e/polyaxon
#        e2e/scripts/install-polyaxon.sh --lock [VERSION]   re-resolves and rewrites the pins
# VERSION defaults to the chart's appVersion. The tests run the appVersion's programs, and an
# older supported version's for the upgrade scenario: make deps installs them all.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = "--all" ]; then
  for req in e2e/polyaxon/requirements-*.txt; do
    v="${req#e2e/polyaxon/requirements-}"
    "$0" "${v%.txt}"
  done
  exit 0
fi

lock=false
if [ "${1:-}" = "--lock" ]; then lock=true; shift; fi
VERSION="${1:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/polyaxon/Chart.yaml)}"
CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}"
VENV="$CACHE/polyaxon-$VERSION"
REQ="e2e/polyaxon/requirements-$VERSION.txt"
# The API needs `streams` (uvicorn, the Kubernetes client) and `platform` (psycopg, celery);
# `sandbox` adds WhiteNoise, with which haupt serves the web UI's static files itself (the
# image's nginx does it there: e2e/cluster/local HostRewrites);
# the agent needs `k8s_async` (2.18 spells the extra `k8s-async`; haupt's `streams` brings
# kubernetes_asyncio in either case); `s3` (s3fs, botocore) serves an artifacts store in a
# bucket: haupt's streams and the runs' sidecar read and write it.
SPECS=("haupt[streams,platform,sandbox]==$VERSION" "polyaxon[k8s_async,s3]==$VERSION")
PYTHON="${PYTHON:-python3}"

log() { echo "install-polyaxon: $*" >&2; }

# Debian splits venv (and ensurepip) out of python3.
venv() {
  "$PYTHON" -m venv "$1" 2>/dev/null && return 0
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log "installing python3-venv with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  rm -rf "$1" && "$PYTHON" -m venv "$1"
}

if $lock; then
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  venv "$work/venv"
  log "resolving ${SPECS[*]}"
  "$work/venv/bin/pip" install -q --dry-run --ignore-installed --report "$work/report.json" \
    -c e2e/polyaxon/constraints.txt "${SPECS[@]}" >&2
  go run ./e2e/cmd/pylock -header "e2e/scripts/install-polyaxon.sh --lock $VERSION: ${SPECS[*]} -c e2e/polyaxon/constraints.txt" <"$work/report.json" >"$REQ"
  log "wrote $REQ ($(grep -c '^[a-z0-9]' "$REQ") packages)"
  exit 0
fi

[ -f "$REQ" ] || { log "no pinned requirements for Polyaxon $VERSION ($REQ): run $0 --lock $VERSION"; exit 1; }
stamp="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ -x "$VENV/bin/haupt" ] && [ "$(cat "$VENV/.requirements-sha256" 2>/dev/null)" = "$stamp" ]; then
  echo "$VENV"; exit 0
fi
start=$(date +%s)
log "installing Polyaxon $VERSION (haupt, polyaxon) into $VENV"
# The stamp is written last: an interrupted install is redone from scratch.
rm -rf "$VENV"; mkdir -p "$CACHE"
venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps --only-binary=:all: -r "$REQ" >&2
"$VENV/bin/haupt" --help >/dev/null
"$VENV/bin/polyaxon" --help >/dev/null
echo "$stamp" >"$VENV/.requirements-sha256"
log "installed in $(( $(date +%s) - start ))s"
echo "$VENV"
