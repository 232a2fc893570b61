# shellcheck shell=bash
# go_build_pinned: builds one program of a module at an exact version from the Go module proxy,
# sourced by the build scripts of the programs the tests run (trivy, gremlins, promtool, the
# exporters, Prometheus and kube-state-metrics).
#
# The build is in a throw-away module that requires exactly that version: `go install
# pkg@version` would also ask the proxy for the module's version list, which it may refuse, and
# a module without replace directives selects the dependency versions of its own go.mod this
# way. Extra environment (GOEXPERIMENT, ...) is the caller's.
#
# Usage: go_build_pinned MODULE VERSION PACKAGE OUT [go build flags...]
go_build_pinned() {
  local module=$1 version=$2 pkg=$3 out=$4 work; shift 4
  work="$(mktemp -d)"
  (
    cd "$work"
    go mod init local/pinnedbuild >/dev/null 2>&1
    echo "require $module $version" >>go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >tools.go
    export GOFLAGS=-mod=mod CGO_ENABLED=0
    go mod tidy >"$work/tidy.log" 2>&1 || { echo "go mod tidy for $module $version failed:" >&2; cat "$work/tidy.log" >&2; exit 1; }
    mkdir -p "$(dirname "$out")"
    go build -trimpath "$@" -o "$out.tmp" "$pkg"
    mv "$out.tmp" "$out"
  )
  local code=$?
  rm -rf "$work"
  return "$code"
}
