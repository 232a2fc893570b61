# shellcheck shell=bash
# The images of the chart's metrics and of the monitoring the kind scenario runs against them,
# sourced by build-kind-images.sh (its helpers: stamped, import_dir, step; STAMP_LABEL, REPO)
# after polyaxon-images.sh (standin). Each is one static binary built from the Go module proxy:
# the exporters under the chart's image names (metrics.postgresql.image, metrics.redis.image),
# Prometheus and kube-state-metrics under names of our own, and polyaxon-deploy itself under
# the chart's metrics.installer.image (its exporter).

# binary_image IMAGE BINARY ENTRYPOINT_PATH WHAT: an image of one static binary, run as nobody
# unless the pod says otherwise, labelled as a stand-in for what it replaces.
binary_image() {
  local img=$1 bin=$2 path=$3 what=$4 d stamp
  stamp="$(sha256sum "$bin" | cut -c1-16)"
  if ! stamped "$img" "$stamp"; then
    d="$(mktemp -d)"
    mkdir -p "$d/tmp" "$d/etc" && chmod 1777 "$d/tmp"
    echo 'nobody:x:65534:65534:nobody:/:/sbin/nologin' >"$d/etc/passwd"
    install -D -m 0755 "$bin" "$d$path"
    import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" --change "LABEL $(standin "$what")" \
      --change "ENTRYPOINT [\"$path\"]" --change 'USER 65534:65534'
    rm -rf "$d"
  fi
  echo "$img"
}

# polyaxon-deploy's own image: the binary of this checkout, static, under the chart's version.
build_deploy_image() {
  local version out="$BIN/polyaxon-deploy"
  version="$(awk '/^version:/ {print $2; exit}' "$REPO/charts/polyaxon/Chart.yaml")"
  (cd "$REPO" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out" ./cmd/polyaxon-deploy)
  binary_image "ghcr.io/polyaxon-deploy/polyaxon-deploy:$version" "$out" /bin/polyaxon-deploy \
    "ghcr.io/polyaxon-deploy/polyaxon-deploy:$version (this checkout's cmd/polyaxon-deploy)"
}

build_monitoring_images() {
  local exporters monitoring
  exporters="$("$REPO/e2e/scripts/build-exporters.sh")"
  monitoring="$("$REPO/e2e/scripts/build-monitoring.sh" | sed -n 1p)"
  # The exporters' names and tags are values.yaml's defaults: the kind scenario installs them.
  binary_image quay.io/prometheuscommunity/postgres-exporter:v0.17.1 "$exporters/postgres_exporter" /bin/postgres_exporter \
    "quay.io/prometheuscommunity/postgres-exporter:v0.17.1 (e2e/scripts/build-exporters.sh)"
  binary_image docker.io/oliver006/redis_exporter:v1.88.0 "$exporters/redis_exporter" /redis_exporter \
    "oliver006/redis_exporter:v1.88.0 (e2e/scripts/build-exporters.sh)"
  binary_image polyaxon-deploy/prometheus:v0.316.0 "$monitoring/prometheus" /bin/prometheus \
    "Prometheus (github.com/prometheus/prometheus v0.316.0, e2e/scripts/build-monitoring.sh)"
  binary_image polyaxon-deploy/kube-state-metrics:v2.20.0 "$monitoring/kube-state-metrics" /kube-state-metrics \
    "kube-state-metrics v2.20.0 (e2e/scripts/build-monitoring.sh)"
  build_deploy_image
}
