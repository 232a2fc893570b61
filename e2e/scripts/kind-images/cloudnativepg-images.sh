# shellcheck shell=bash
# CloudNativePG's two images for kind, built only on request (`build-kind-images.sh
# cloudnativepg`; make test's image set does not include them), sourced by build-kind-images.sh
# after polyaxon-images.sh and monitoring-images.sh, whose helpers (rootfs, import_dir, stamped,
# standin, pkg_version, binary_image, step, log, die) and settings (CACHE, REPO, STAMP_LABEL) they
# use. Both go under the published names, as the other stand-ins do, labelled as stand-ins:
#   - the operator, ghcr.io/cloudnative-pg/cloudnative-pg:<version>: build-cloudnativepg.sh's
#     static manager, laid out as in the published image (below), run as 65532 unless the pod
#     says otherwise (the release manifest runs it as 10001). The init container
#     `bootstrap-controller` of every Postgres pod runs this image too, to copy /manager into
#     the pod.
#   - the operand, ghcr.io/cloudnative-pg/postgresql:<Postgres version> and :<major>: Debian
#     bookworm's postgresql-15 (the Postgres stand-in's root filesystem) with `postgres` as uid
#     and gid 26, CloudNativePG's default postgresUID/postgresGID (initdb looks its uid up), and
#     PostgreSQL's own programs first on PATH (the instance manager runs initdb, postgres,
#     pg_ctl, pg_rewind, pg_basebackup, pg_isready, pg_controldata by name). The chart names
#     ghcr.io/cloudnative-pg/postgresql with postgresql.image.tag, which values/kind-demo.yaml
#     sets to 15: the tag must parse as a Postgres version for CloudNativePG's webhook.

# build_cloudnativepg_operator_image: prints the operator image's name. The layout is the
# published image's: the manager at /operator/manager_<GOARCH> and /manager a link to it, the
# working directory /. The operator finds the architectures it can give instances by globbing
# operator/manager_* from its working directory (pkg/utils/discovery.go); with the manager at
# /manager alone, every Cluster's reconcile fails with "invalid architecture: amd64" and its
# status stays empty.
build_cloudnativepg_operator_image() {
  local bin v arch img d stamp
  bin="$("$REPO/e2e/scripts/build-cloudnativepg.sh" | sed -n 1p)"
  v="$(basename "$(dirname "$bin")")"; v="${v#cloudnativepg-v}"
  arch="$(go env GOARCH)"
  img="ghcr.io/cloudnative-pg/cloudnative-pg:$v"
  stamp="$({ sha256sum <"$bin"; echo "$arch"; declare -f build_cloudnativepg_operator_image; } | sha256sum | cut -c1-16)"
  if ! stamped "$img" "$stamp"; then
    d="$(mktemp -d)"
    mkdir -p "$d/tmp" "$d/etc" "$d/operator" && chmod 1777 "$d/tmp"
    # The published image's user (distroless nonroot); the release manifest runs it as 10001.
    echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$d/etc/passwd"
    echo 'nonroot:x:65532:' >"$d/etc/group"
    install -m 0755 "$bin" "$d/operator/manager_$arch"
    ln -s "operator/manager_$arch" "$d/manager"
    import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" \
      --change "LABEL $(standin "$img (CloudNativePG's manager, e2e/scripts/build-cloudnativepg.sh, from the Go module proxy)")" \
      --change 'WORKDIR /' --change 'ENTRYPOINT ["/manager"]' --change 'USER 65532:65532'
    rm -rf "$d"
  fi
  echo "$img"
}

# build_cloudnativepg_postgres_image: prints the operand image's two names (version and major).
CNPG_POSTGRES_REPO=ghcr.io/cloudnative-pg/postgresql
build_cloudnativepg_postgres_image() {
  local d v root stamp img olduid oldgid
  root="$(rootfs postgres postgresql-15)"
  v="$(pkg_version "$root" postgresql-15)"
  img="$CNPG_POSTGRES_REPO:$v"
  # What goes in: the root (named by its packages) and this function's recipe.
  stamp="$({ echo "$root"; declare -f build_cloudnativepg_postgres_image; } | sha256sum | cut -c1-16)"
  if ! stamped "$img" "$stamp"; then
    d="$(mktemp -d)"
    cp -a "$root/." "$d/"
    rm -f "$d/.complete"
    # The package's own cluster (pg_createcluster at install) is not used: the operator runs
    # initdb into its volume.
    rm -rf "$d"/etc/postgresql/15 "$d"/var/lib/postgresql/15 "$d"/var/log/postgresql/*
    # postgres becomes uid/gid 26. Debian's base-passwd gives gid 26 to `tape`, which owns
    # nothing in this root: it goes.
    olduid="$(awk -F: '$1=="postgres"{print $3}' "$d/etc/passwd")"
    oldgid="$(awk -F: '$1=="postgres"{print $3}' "$d/etc/group")"
    [ -n "$olduid" ] && [ -n "$oldgid" ] || die "no postgres user or group in $root"
    [ -z "$(find "$d" -xdev -gid 26 -print -quit)" ] || die "gid 26 owns files in $root"
    sed -i '/^tape:/d' "$d/etc/group" "$d/etc/gshadow"
    sed -i "s/^postgres:x:$olduid:$oldgid:/postgres:x:26:26:/" "$d/etc/passwd"
    sed -i "s/^postgres:x:$oldgid:/postgres:x:26:/" "$d/etc/group"
    find "$d" -xdev -uid "$olduid" -exec chown -h 26 {} +
    find "$d" -xdev -gid "$oldgid" -exec chgrp -h 26 {} +
    [ "$(chroot "$d" id -u postgres):$(chroot "$d" id -g postgres)" = 26:26 ] || die "postgres is not 26:26 in $img"
    mkdir -p "$d/var/lib/postgresql/data" && chown 26:26 "$d/var/lib/postgresql/data"
    import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" \
      --change "LABEL $(standin "$CNPG_POSTGRES_REPO (PostgreSQL $v from Debian bookworm's postgresql-15, for CloudNativePG)")" \
      --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'USER 26:26' --change 'CMD ["postgres"]'
    rm -rf "$d"
  fi
  docker tag "$img" "$CNPG_POSTGRES_REPO:${v%%.*}"
  echo "$img $CNPG_POSTGRES_REPO:${v%%.*}"
}

# build_cloudnativepg_images: both, one name a line (the operator first).
build_cloudnativepg_images() {
  step "CloudNativePG's operator (build-cloudnativepg.sh's manager)" build_cloudnativepg_operator_image
  step "CloudNativePG's operand (Debian's postgresql-15, postgres as 26)" build_cloudnativepg_postgres_image | tr ' ' '\n'
}
