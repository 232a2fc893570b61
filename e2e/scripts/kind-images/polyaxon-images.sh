# shellcheck shell=bash
# Polyaxon's images and what they run beside (Postgres, Redis, the demo run's Python, Traefik),
# sourced by build-kind-images.sh, whose helpers (rootfs, import_dir, stamped, step, log, die)
# and settings (CACHE, BIN, REPO) they use.

# The shared root of Polyaxon's images: Debian's python3 and a virtual environment at $VENV
# with the pinned haupt and polyaxon of e2e/polyaxon/image/requirements-<version>.txt (hashes
# required, wheels only). These pins are the host's (e2e/polyaxon/requirements-*.txt) resolved
# again for bookworm's Python 3.11.2: the host's resolve for 3.11.7 has a package that needs
# 3.11.5 (soupsieve 4.1.3). The venv is not under /opt/polyaxon: Polyaxon mounts its run tools
# at /opt/polyaxon/bin in run pods.
POLYAXON_VERSION="${POLYAXON_VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO/charts/polyaxon/Chart.yaml")}"
PY_PKGS=python3,python3-venv,ca-certificates
# Polyaxon's images add nginx: the gateway pod's proxy runs it from the API image, as from the
# published one (charts/polyaxon/templates/gateway/_proxy.tpl). The root filesystem is named
# for its packages (rootfs): a change of the list makes a new one.
POLYAXON_PKGS="$PY_PKGS,nginx"
PY_BASE="polyaxon-deploy/polyaxon-python:$POLYAXON_VERSION"
VENV=/usr/local/lib/polyaxon
IMAGE_DIR="$REPO/e2e/polyaxon/image"
# Every image that stands in for a published one says so in this label.
STANDIN_LABEL=dev.polyaxon-deploy.stand-in
standin() { echo "$STANDIN_LABEL=\"local stand-in for $1, built by e2e/scripts/build-kind-images.sh; not the published image\""; }

build_polyaxon_python() {
  local img="$PY_BASE" req="$IMAGE_DIR/requirements-$POLYAXON_VERSION.txt" d stamp root
  stamp="$({ cat "$req"; echo "$VENV"; echo "$POLYAXON_PKGS"; } | sha256sum | cut -c1-16)"
  stamped "$img" "$stamp" && return 0
  root="$(rootfs polyaxon "$POLYAXON_PKGS")"
  d="$(mktemp -d)"
  cp -a "$root/." "$d/"
  rm -f "$d/.complete"
  # The wheels are fetched by the host's pip (its index and trust settings), checked against
  # the pinned hashes, and installed in the chroot without an index.
  local wheels="$CACHE/wheels/polyaxon-$POLYAXON_VERSION-$(sha256sum "$req" | cut -c1-16)"
  if [ ! -f "$wheels/.complete" ]; then
    mkdir -p "$wheels"
    python3 -m pip download -q --disable-pip-version-check --require-hashes --no-deps --only-binary=:all: \
      --python-version 3.11.2 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_17_x86_64 --platform linux_x86_64 --implementation cp \
      -r "$req" -d "$wheels" >&2
    touch "$wheels/.complete"
  fi
  mkdir -p "$d/tmp/wheels" && cp "$wheels"/*.whl "$d/tmp/wheels/"
  install -m 0644 "$req" "$d/tmp/requirements.txt"
  chroot "$d" python3 -m venv "$VENV"
  chroot "$d" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$VENV/bin/pip" install -q --disable-pip-version-check \
    --no-index --find-links /tmp/wheels --require-hashes --no-deps -r /tmp/requirements.txt >&2
  chroot "$d" "$VENV/bin/haupt" --help >/dev/null
  chroot "$d" "$VENV/bin/polyaxon" --help >/dev/null
  rm -rf "$d/tmp/requirements.txt" "$d/tmp/wheels"
  # The user the chart runs Polyaxon's containers as (securityContext.user), with a home.
  echo 'polyaxon:x:2222:2222:polyaxon:/home/polyaxon:/bin/bash' >>"$d/etc/passwd"
  echo 'polyaxon:x:2222:' >>"$d/etc/group"
  install -d -o 2222 -g 2222 "$d/home/polyaxon"
  import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" \
    --change "ENV PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  rm -rf "$d"
}

# polyaxon_image NAME SERVICE: polyaxon/NAME:<appVersion> on the Python root, with the
# entrypoint of e2e/polyaxon/image and POLYAXON_SERVICE=SERVICE.
polyaxon_image() {
  local name=$1 service=$2 img="polyaxon/$1:$POLYAXON_VERSION" stamp
  stamp="$({ docker image inspect --format '{{.Id}}' "$PY_BASE"; cat "$IMAGE_DIR/Dockerfile" "$IMAGE_DIR/entrypoint.sh"; echo "$service"; } | sha256sum | cut -c1-16)"
  stamped "$img" "$stamp" && return 0
  local out
  # The classic builder (Docker 20.10's default; it warns that it is deprecated).
  out="$(DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$PY_BASE" --build-arg "SERVICE=$service" \
    --build-arg "PUBLISHED=polyaxon/$name" --build-arg "VERSION=$POLYAXON_VERSION" \
    --label "$STAMP_LABEL=$stamp" -t "$img" "$IMAGE_DIR" 2>&1)" || die "docker build $img: $out"
  log "image $img"
}

# The operator: the e2e stand-in (e2e/cmd/polyaxon-operator), a static binary at /manager.
build_operator_image() {
  local img="polyaxon/polyaxon-operator:$POLYAXON_VERSION" out="$BIN/polyaxon-operator" d stamp
  (cd "$REPO" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$out" ./e2e/cmd/polyaxon-operator)
  stamp="$(sha256sum "$out" | cut -c1-16)"
  stamped "$img" "$stamp" && return 0
  d="$(mktemp -d)"
  mkdir -p "$d/tmp" "$d/etc" && chmod 1777 "$d/tmp"
  echo 'polyaxon:x:2222:2222:polyaxon:/tmp:/sbin/nologin' >"$d/etc/passwd"
  install -m 0755 "$out" "$d/manager"
  import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" --change "LABEL $(standin "polyaxon/polyaxon-operator:$POLYAXON_VERSION (e2e/cmd/polyaxon-operator)")" \
    --change 'ENTRYPOINT ["/manager"]' --change 'USER 2222:2222'
  rm -rf "$d"
}

# Postgres and Redis from Debian bookworm's packages: PostgreSQL 15 and Redis 7.0 (bookworm
# has no 16 or 7.4, nor has any suite of Debian's mirror: trixie has 17 and 8.0). Each is
# tagged with the version it holds and its major (minor for Redis), never as the chart's
# default 16.4/7.4: the chart names Postgres's data volume by the tag's major. The kind demo
# sets these tags (values/kind-demo.yaml).
pkg_version() { chroot "$1" dpkg-query -W -f '${Version}' "$2" | sed 's/^[0-9]*://; s/[-+~].*//'; }

build_postgres_image() {
  local d v stamp root
  root="$(rootfs postgres postgresql-15)"
  v="$(pkg_version "$root" postgresql-15)"
  stamp="$({ cat "$IMAGE_DIR/postgres-entrypoint.sh"; echo "$root"; } | sha256sum | cut -c1-16)"
  if ! stamped "postgres:$v" "$stamp"; then
    d="$(mktemp -d)"
    cp -a "$root/." "$d/"
    # The package's own cluster (pg_createcluster at install) is not used.
    rm -rf "$d"/etc/postgresql/15 "$d"/var/lib/postgresql/15
    install -m 0755 "$IMAGE_DIR/postgres-entrypoint.sh" "$d/usr/local/bin/postgres-entrypoint"
    # The chart's user for the Postgres pod (postgresql.securityContext.user): initdb needs a name.
    echo 'pgpolyaxon:x:2232:2232:postgres:/var/lib/postgresql:/bin/sh' >>"$d/etc/passwd"
    echo 'pgpolyaxon:x:2232:' >>"$d/etc/group"
    mkdir -p "$d/var/lib/postgresql/data" "$d/var/run/postgresql"
    import_dir "postgres:$v" "$d" --change "LABEL $STAMP_LABEL=$stamp" \
      --change "LABEL $(standin "postgres (PostgreSQL $v from Debian bookworm's postgresql-15)")" \
      --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV PGDATA=/var/lib/postgresql/data' --change 'USER 2232:2232' \
      --change 'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]' --change 'CMD ["postgres"]'
    rm -rf "$d"
  fi
  docker tag "postgres:$v" "postgres:${v%%.*}"
  echo "postgres:$v postgres:${v%%.*}"
}

build_redis_image() {
  local d v root
  root="$(rootfs redis redis-server)"
  v="$(pkg_version "$root" redis-server)"
  if ! stamped "redis:$v" "${root##*-}"; then
    d="$(mktemp -d)"
    cp -a "$root/." "$d/"
    mkdir -p "$d/data"
    import_dir "redis:$v" "$d" --change "LABEL $STAMP_LABEL=${root##*-}" --change "LABEL $(standin "redis (Redis $v from Debian bookworm's redis-server)")" \
      --change 'USER 2234:2234' --change 'WORKDIR /data' --change 'CMD ["redis-server"]'
    rm -rf "$d"
  fi
  docker tag "redis:$v" "redis:${v%.*}"
  echo "redis:$v redis:${v%.*}"
}

# The run image of values/polyaxonfiles/hello-job.yaml: Debian bookworm's python3 on the
# Polyaxon root's Debian root (without its venv), tagged with what it holds (python:3.11.2-slim
# and python:3.11-slim); `python` is python3, as in the published image.
build_python_image() {
  local d v root
  root="$(rootfs python "$PY_PKGS")"
  v="$(pkg_version "$root" python3)"
  if ! stamped "python:$v-slim" "${root##*-}"; then
    d="$(mktemp -d)"
    cp -a "$root/." "$d/"
    ln -sf /usr/bin/python3 "$d/usr/local/bin/python"
    import_dir "python:$v-slim" "$d" --change "LABEL $STAMP_LABEL=${root##*-}" --change "LABEL $(standin "python (Python $v from Debian bookworm's python3)")" \
      --change 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["python3"]'
    rm -rf "$d"
  fi
  docker tag "python:$v-slim" "python:${v%.*}-slim"
  echo "python:$v-slim python:${v%.*}-slim"
}

# Traefik, the kind scenario's Gateway API controller and data plane: build-traefik.sh's
# static binary (the one the local provider runs), under Traefik's image name and version.
build_traefik_image() {
  local bin v img d stamp
  bin="$("$REPO/e2e/scripts/build-traefik.sh" | sed -n 1p)"
  v="$(basename "$(dirname "$bin")")"; v="${v#traefik-}"
  img="traefik:$v"
  stamp="$(sha256sum "$bin" | cut -c1-16)"
  if ! stamped "$img" "$stamp"; then
    d="$(mktemp -d)"
    mkdir -p "$d/tmp" "$d/etc" && chmod 1777 "$d/tmp"
    echo 'nobody:x:65534:65534:nobody:/:/sbin/nologin' >"$d/etc/passwd"
    install -m 0755 "$bin" "$d/traefik"
    import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" \
      --change "LABEL $(standin "traefik:$v (e2e/scripts/build-traefik.sh, from the Go module proxy)")" \
      --change 'ENTRYPOINT ["/traefik"]' --change 'USER 65534:65534'
    rm -rf "$d"
  fi
  echo "$img"
}

# The S3 store of the e2e (e2e/cluster/addons/s3store): build-s3store.sh's static versitygw
# (the binary the local provider runs) alone, run as nobody (monitoring-images.sh's binary_image).
build_s3store_image() {
  local bin v
  bin="$("$REPO/e2e/scripts/build-s3store.sh")"
  v="$(basename "$(dirname "$bin")")"; v="${v#versitygw-}"
  binary_image "polyaxon-deploy/s3store:$v" "$bin" /versitygw \
    "polyaxon-deploy/s3store:$v (versitygw $v, an S3 store, e2e/scripts/build-s3store.sh, from the Go module proxy)"
}

# The images a kind cluster needs for the chart, one per line (Polyaxon's at the chart's
# appVersion; Postgres and Redis as tagged above).
build_polyaxon_images() {
  step "Polyaxon $POLYAXON_VERSION Python root" build_polyaxon_python
  local n
  for n in api:api agent:agent init:init sidecar:sidecar scheduler:scheduler events-handlers:events_handlers; do
    step "polyaxon/polyaxon-${n%%:*}:$POLYAXON_VERSION" polyaxon_image "polyaxon-${n%%:*}" "${n#*:}"
    echo "polyaxon/polyaxon-${n%%:*}:$POLYAXON_VERSION"
  done
  step "polyaxon/polyaxon-operator:$POLYAXON_VERSION" build_operator_image
  echo "polyaxon/polyaxon-operator:$POLYAXON_VERSION"
  step "postgres (Debian's postgresql-15)" build_postgres_image | tr ' ' '\n'
  step "redis (Debian's redis-server)" build_redis_image | tr ' ' '\n'
  step "python (Debian's python3, the demo run's image)" build_python_image | tr ' ' '\n'
  step "traefik (build-traefik.sh's)" build_traefik_image
  step "s3store (build-s3store.sh's versitygw)" build_s3store_image
  step "exporters, Prometheus and kube-state-metrics" build_monitoring_images
}
