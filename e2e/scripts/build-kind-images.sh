#!/usr/bin/env bash
# Builds, on a machine that reaches no container registry, kind's node image for the Kubernetes
# version the local provider builds and every image a kind cluster needs, preloaded in the node:
# the control plane, kube-proxy, etcd, CoreDNS, pause, a NetworkPolicy-enforcing CNI
# (kube-router) and a storage provisioner. Sources: Debian's packages (debootstrap) and the Go
# module proxy; kind's node layout (its base image's files) comes from the kind module that
# go.mod requires. Nothing is pulled. Facts, obstacles and timings: docs/kind-offline.md.
#
# The images live in a private Docker engine (its own socket and data root), never the default
# socket, so that tools looking for an engine at /var/run/docker.sock do not find this one.
#
# Usage: e2e/scripts/build-kind-images.sh [build|docker|stop|env|polyaxon|cloudnativepg]
#   build   (default) start the private engine and build whatever is missing; a second run is a
#           no-op. Prints the node image's name on stdout.
#   docker  only start the private engine
#   stop    stop the private engine (and remove its forwarding guard)
#   env     print the DOCKER_HOST line for the private engine
#   preflight  check what kind's nodes need of this machine (root, overlay, cgroups, netfilter);
#           every command that starts the engine checks it first
#   polyaxon  Polyaxon's images under the chart's names and appVersion (api, agent, init, sidecar,
#           scheduler, events-handlers on the Python root; the operator stand-in), Postgres,
#           Redis and the demo run's Python from Debian's packages, Traefik from
#           build-traefik.sh's binary; prints every image's name on stdout, one a line
#   cloudnativepg  CloudNativePG's operator and operand (Postgres) images
#           (kind-images/cloudnativepg-images.sh), only on request: neither make test nor
#           if-possible builds them; prints both names, the operator's first
#   roots   only the Debian root filesystems the images are made from
#   if-possible  build and polyaxon on a machine that can run kind's nodes (roots beside build's
#           Go programs); elsewhere say why and succeed (make test: the kind scenario then
#           reports that kind was not tested)
set -euo pipefail

# shellcheck source=versions.sh
. "$(dirname "$0")/versions.sh" # KUBE_VERSION, ETCD_VERSION: build-binaries.sh builds both
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.3.4}"   # kind v0.33.0's base image pins v2.3.4
CRICTL_VERSION="${CRICTL_VERSION:-v1.37.0}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.9.1}" # kind v0.33.0's base image pins v1.9.1
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.6}"        # kubeadm v1.37's CoreDNSVersion
PAUSE_VERSION="${PAUSE_VERSION:-3.10.2}"             # kubeadm v1.37's PauseVersion
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
LPP_VERSION="${LPP_VERSION:-v0.0.30}"                # rancher/local-path-provisioner
KIND_VERSION="${KIND_VERSION:-$(sed -n 's/^\s*sigs.k8s.io\/kind \(v[^ ]*\).*/\1/p' "$(dirname "$0")/../../go.mod")}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

CACHE="${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}/kind"
RUN_DIR="${KIND_DOCKER_RUN:-/run/polyaxon-kind}"
SOCK="$RUN_DIR/docker.sock"
export DOCKER_HOST="unix://$SOCK"
NODE_IMAGE="${KIND_NODE_IMAGE:-polyaxon-deploy/kind-node:$KUBE_VERSION}"
NETWORK_BRIDGE=br-pxkind # the bridge of the "kind" Docker network, guarded against forwarding
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="$CACHE/bin"
TIMINGS="$CACHE/timings.log"

log() { echo "build-kind-images: $*" >&2; }
die() { log "$*"; exit 1; }
# step NAME CMD...: runs a build step and records its duration.
step() {
  local name=$1 s; shift
  s=$(date +%s)
  log "$name ..."
  "$@"
  log "$name done in $(($(date +%s) - s))s"
  echo "$(date -u +%FT%TZ) $name $(($(date +%s) - s))s" >>"$TIMINGS"
}


# preflight: what kind's nodes need of this machine, checked before anything is installed or
# built; names everything missing and the local provider as the way on.
preflight() {
  local missing=() c
  [ "$(id -u)" = 0 ] || missing+=("root (dockerd, debootstrap and kind's privileged node containers)")
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
    missing+=("the overlay filesystem (Docker's overlay2, containerd's overlayfs snapshotter)")
  if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
    for c in cpu memory pids; do
      [ -d "/sys/fs/cgroup/$c" ] || missing+=("the $c cgroup controller (the kubelet's)")
    done
  fi
  [ -d /proc/sys/net/netfilter ] || modprobe nf_conntrack 2>/dev/null ||
    missing+=("netfilter connection tracking (kube-proxy, kube-router)")
  [ -d /proc/sys/net/bridge ] || modprobe br_netfilter 2>/dev/null ||
    missing+=("br_netfilter (Services between pods of one node's bridge)")
  [ ${#missing[@]} -eq 0 ] && return 0
  log "the kind provider cannot run on this machine; missing:"
  for c in "${missing[@]}"; do log "  - $c"; done
  die "nothing was built. The local provider needs none of this: make demo (without E2E_PROVIDER=kind)"
}

ensure_packages() {
  local want=()
  command -v dockerd >/dev/null || want+=(docker.io)
  command -v debootstrap >/dev/null || want+=(debootstrap)
  command -v gcc >/dev/null || want+=(gcc libc6-dev)
  [ ${#want[@]} -eq 0 ] && return 0
  log "installing ${want[*]} from Debian's packages"
  apt-get update -qq
  # policy-rc.d stops the package from starting an engine on the default socket.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >&2
}

docker_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

build_kind_runc() {
  [ -x "$BIN/kind-runc" ] && [ "$BIN/kind-runc" -nt "$REPO/e2e/cmd/kind-runc/main.go" ] &&
    [ "$BIN/kind-runc" -nt "$REPO/e2e/cluster/ocicaps/ocicaps.go" ] && return 0
  mkdir -p "$BIN"
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/kind-runc" ./e2e/cmd/kind-runc)
}

start_docker() {
  preflight
  ensure_packages
  build_kind_runc
  mkdir -p "$RUN_DIR/exec" "$CACHE/docker"
  if ! docker_up; then
    # kind-runc drops the capabilities this machine's bounding set lacks (CAP_SYS_RESOURCE)
    # before runc sees a privileged container's spec. No bridge/iptables of Docker's own.
    printf '{"runtimes":{"kind-runc":{"path":"%s"}},"default-runtime":"kind-runc"}\n' "$BIN/kind-runc" >"$RUN_DIR/daemon.json"
    log "starting a private dockerd on $SOCK (data root $CACHE/docker)"
    # In its own session, every descriptor its own: a caller that reads this script's output
    # (the e2e tests do) must see it end, not wait on the daemon.
    (cd "$RUN_DIR" && setsid -f dockerd -H "$DOCKER_HOST" --data-root "$CACHE/docker" --exec-root "$RUN_DIR/exec" \
      --pidfile "$RUN_DIR/docker.pid" --config-file "$RUN_DIR/daemon.json" \
      --bridge none --iptables=false --ip-masq=false </dev/null >"$RUN_DIR/dockerd.log" 2>&1)
    for _ in $(seq 60); do docker_up && break; sleep 1; done
    docker_up || die "dockerd did not answer on $SOCK; see $RUN_DIR/dockerd.log"
  fi
  # kind uses an existing network called "kind". Ours has a fixed bridge name so that the host
  # can refuse to forward anything from it: the nodes talk to each other and to this host only.
  if ! docker network inspect kind >/dev/null 2>&1; then
    docker network create -d bridge -o com.docker.network.bridge.name=$NETWORK_BRIDGE \
      -o com.docker.network.bridge.enable_ip_masquerade=false kind >/dev/null
  fi
  iptables -C FORWARD -i $NETWORK_BRIDGE ! -o $NETWORK_BRIDGE -j DROP 2>/dev/null ||
    iptables -I FORWARD -i $NETWORK_BRIDGE ! -o $NETWORK_BRIDGE -j DROP
  # The nodes' unpacked images live in memory (cluster.WithKindSnapshotsIn): written once at
  # load, gone at once when a cluster is deleted, instead of gigabytes on the shared disk.
  mkdir -p "$RUN_DIR/snapshots"
  mountpoint -q "$RUN_DIR/snapshots" ||
    mount -t tmpfs -o "size=${KIND_SNAPSHOTS_SIZE:-16g},mode=0700" polyaxon-kind-snapshots "$RUN_DIR/snapshots"
}

stop_docker() {
  if [ -s "$RUN_DIR/docker.pid" ]; then
    local pid; pid=$(cat "$RUN_DIR/docker.pid")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping dockerd $pid"
      kill "$pid"
      for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
  fi
  while iptables -C FORWARD -i $NETWORK_BRIDGE ! -o $NETWORK_BRIDGE -j DROP 2>/dev/null; do
    iptables -D FORWARD -i $NETWORK_BRIDGE ! -o $NETWORK_BRIDGE -j DROP
  done
}

# --- Go programs, from the module proxy ----------------------------------------------------

# modsrc MODULE@VERSION: a writable copy of a module's source (its own go.mod and replaces).
modsrc() {
  local dir dst="$CACHE/src/${1//\//_}"
  if [ ! -f "$dst/go.mod" ]; then
    dir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    [ -n "$dir" ] || die "go mod download $1 failed"
    rm -rf "$dst.tmp" && mkdir -p "$(dirname "$dst")" && cp -r "$dir" "$dst.tmp" && chmod -R u+w "$dst.tmp"
    mv "$dst.tmp" "$dst"
  fi
  echo "$dst"
}

# gobuild OUT MODULE@VERSION PKG [extra go build flags...]: builds PKG inside the module's copy.
gobuild() {
  local out=$1 mod=$2 pkg=$3 src; shift 3
  [ -x "$out" ] && return 0
  src="$(modsrc "$mod")"
  mkdir -p "$(dirname "$out")"
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED="${CGO:-0}" nice -n 10 go build -trimpath "$@" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  log "built $out"
}

# CoreDNS with only the plugins of kubeadm's Corefile, in its order: the module's own main
# links every plugin, cloud DNS back ends and their SDKs included (most of a cold build). A
# main beside it imports coremain and these plugins and sets the server's directives, as
# CoreDNS documents for builds without plugin.cfg.
# DIRECTIVE:PACKAGE (the prometheus directive is the metrics package).
COREDNS_PLUGINS="errors:errors health:health ready:ready kubernetes:kubernetes prometheus:metrics forward:forward cache:cache loop:loop reload:reload loadbalance:loadbalance"
build_coredns() {
  local out="$BIN/coredns-$COREDNS_VERSION/coredns" src p
  [ -x "$out" ] && return 0
  src="$(modsrc "github.com/coredns/coredns@$COREDNS_VERSION")"
  mkdir -p "$src/cmd/kubeadm-coredns"
  {
    printf '// Generated by build-kind-images.sh: CoreDNS with the plugins of kubeadm'"'"'s Corefile.\npackage main\n\nimport (\n'
    printf '\t"github.com/coredns/coredns/core/dnsserver"\n\t"github.com/coredns/coredns/coremain"\n\n'
    for p in $COREDNS_PLUGINS; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "${p#*:}"; done
    printf ')\n\nfunc init() {\n\tdnsserver.Directives = []string{'
    for p in $COREDNS_PLUGINS; do printf '"%s", ' "${p%%:*}"; done
    printf '}\n}\n\nfunc main() { coremain.Run() }\n'
  } >"$src/cmd/kubeadm-coredns/main.go"
  gofmt -w "$src/cmd/kubeadm-coredns/main.go"
  gobuild "$out" "github.com/coredns/coredns@$COREDNS_VERSION" ./cmd/kubeadm-coredns -ldflags "-s -w"
}

# Kubernetes' binaries and etcd come from the local provider's build (build-binaries.sh): one
# build of a version for both providers.
control_plane_bin() { KUBE_VERSION=$KUBE_VERSION ETCD_VERSION=$ETCD_VERSION "$REPO/e2e/scripts/build-binaries.sh"; }

build_go() {
  local d="$BIN/containerd-$CONTAINERD_VERSION" cm="github.com/containerd/containerd/v2@$CONTAINERD_VERSION" p
  local tags="no_aufs no_zfs no_btrfs no_devmapper"
  for p in containerd containerd-shim-runc-v2 ctr; do
    gobuild "$d/$p" "$cm" "./cmd/$p" -tags "$tags" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  done
  gobuild "$BIN/crictl-$CRICTL_VERSION/crictl" "sigs.k8s.io/cri-tools@$CRICTL_VERSION" ./cmd/crictl -ldflags "-s -w"
  for p in ipam/host-local main/loopback main/ptp main/bridge meta/portmap; do
    gobuild "$BIN/cni-plugins-$CNI_PLUGINS_VERSION/${p#*/}" "github.com/containernetworking/plugins@$CNI_PLUGINS_VERSION" "./plugins/$p" -ldflags "-s -w"
  done
  build_coredns
  gobuild "$BIN/kube-router-$KUBE_ROUTER_VERSION/kube-router" "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION" ./cmd/kube-router \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION"
  gobuild "$BIN/local-path-provisioner-$LPP_VERSION/local-path-provisioner" "github.com/rancher/local-path-provisioner@$LPP_VERSION" . -ldflags "-s -w"
}

# pause from Kubernetes' own source (build/pause/linux/pause.c in the k8s.io/kubernetes module).
build_pause() {
  local out="$BIN/pause-$PAUSE_VERSION/pause" src
  [ -x "$out" ] && return 0
  src="$(cd /tmp && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  mkdir -p "$(dirname "$out")"
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-polyaxon-deploy" -o "$out" "$src/build/pause/linux/pause.c"
  strip "$out"
}

# --- root filesystems, from Debian's packages ---------------------------------------------

ROOTFS="$CACHE/rootfs"
NODE_PKGS=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc
NET_PKGS=iptables,ipset,conntrack,iproute2,kmod,ca-certificates
# rootfs NAME PACKAGES: prints the directory of a bookworm minbase root filesystem with
# PACKAGES, named by what goes into it (suite, mirror, packages: a change makes a new one, and
# the older ones of NAME go), made once. A lock per root lets `roots` make them beside a build
# that waits for the one it needs.
rootfs() {
  local name=$1 pkgs=$2 dir
  dir="$ROOTFS/$name-$(echo "bookworm $DEBIAN_MIRROR $pkgs" | sha256sum | cut -c1-12)"
  if [ ! -f "$dir/.complete" ]; then
    mkdir -p "$ROOTFS"
    (
      flock 9
      [ -f "$dir/.complete" ] && exit 0
      rm -rf "$dir.tmp"
      nice -n 10 debootstrap --variant=minbase --include="$pkgs" bookworm "$dir.tmp" "$DEBIAN_MIRROR" >"$dir.log" 2>&1 ||
        die "debootstrap $name failed; see $dir.log"
      rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*
      touch "$dir.tmp/.complete"; rm -rf "$dir"; mv "$dir.tmp" "$dir"
      local old
      for old in "$ROOTFS/$name"-*; do
        case "$old" in "$dir"*) ;; *) rm -rf "$old" ;; esac
      done
    ) 9>"$dir.lock"
  fi
  echo "$dir"
}

# Every root filesystem the images are made from: network- and disk-bound, so `if-possible`
# makes them beside the Go builds.
make_roots() {
  rootfs node "$NODE_PKGS" >/dev/null
  rootfs net "$NET_PKGS" >/dev/null
  rootfs polyaxon "$POLYAXON_PKGS" >/dev/null
  rootfs postgres postgresql-15 >/dev/null
  rootfs redis redis-server >/dev/null
  rootfs python "$PY_PKGS" >/dev/null
}

# --- images -------------------------------------------------------------------------------

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# import_dir IMAGE DIR [--change ...]: one-layer image from a directory.
import_dir() {
  local img=$1 dir=$2; shift 2
  tar --numeric-owner -C "$dir" -c . | docker import "$@" - "$img" >/dev/null
  log "image $img"
}

# files_stamp ROOT ENTRYPOINT_JSON FILE:DEST...: a digest of what goes into an image of files
# (each file's content and place, the entrypoint, the root filesystem it goes on).
files_stamp() {
  local f
  { echo "$1 $2"; shift 2; for f in "$@"; do echo "$(sha256sum <"${f%%:*}") ${f#*:}"; done; } | sha256sum | cut -c1-16
}

# static_image IMAGE ENTRYPOINT_JSON FILE:DEST...: an image of static binaries only, made again
# when a file changes.
static_image() {
  local img=$1 ep=$2 d f stamp; shift 2
  stamp="$(files_stamp scratch "$ep" "$@")"
  stamped "$img" "$stamp" && return 0
  d="$(mktemp -d)"
  mkdir -p "$d/tmp" "$d/etc" && chmod 1777 "$d/tmp"
  echo 'nobody:x:65534:65534:nobody:/:/sbin/nologin' >"$d/etc/passwd"
  for f in "$@"; do install -D -m 0755 "${f%%:*}" "$d/${f#*:}"; done
  import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" --change "ENTRYPOINT $ep" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
  rm -rf "$d"
}

# net_image IMAGE ENTRYPOINT_JSON FILE:DEST...: static binaries on a Debian root with iptables.
net_image() {
  local img=$1 ep=$2 d f root stamp; shift 2
  root="$(rootfs net "$NET_PKGS")"
  stamp="$(files_stamp "$root" "$ep" "$@")"
  stamped "$img" "$stamp" && return 0
  d="$(mktemp -d)"
  cp -a "$root/." "$d/"
  for f in "$@"; do install -D -m 0755 "${f%%:*}" "$d/${f#*:}"; done
  import_dir "$img" "$d" --change "LABEL $STAMP_LABEL=$stamp" --change "ENTRYPOINT $ep" --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  rm -rf "$d"
}

KPROXY_IMAGE="registry.k8s.io/kube-proxy:$KUBE_VERSION"
KUBE_ROUTER_IMAGE="docker.io/cloudnativelabs/kube-router:$KUBE_ROUTER_VERSION"
LPP_IMAGE="docker.io/rancher/local-path-provisioner:$LPP_VERSION"
HELPER_IMAGE="docker.io/polyaxon-deploy/local-path-helper:bookworm"
preload_images() {
  local cp; cp="$(control_plane_bin)"
  echo "registry.k8s.io/pause:$PAUSE_VERSION"
  static_image "registry.k8s.io/pause:$PAUSE_VERSION" '["/pause"]' "$BIN/pause-$PAUSE_VERSION/pause:pause" >&2
  echo "registry.k8s.io/etcd:${ETCD_VERSION#v}-0"
  static_image "registry.k8s.io/etcd:${ETCD_VERSION#v}-0" '["/usr/local/bin/etcd"]' "$cp/etcd:usr/local/bin/etcd" >&2
  echo "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
  static_image "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" '["/coredns"]' "$BIN/coredns-$COREDNS_VERSION/coredns:coredns" >&2
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    echo "registry.k8s.io/$c:$KUBE_VERSION"
    static_image "registry.k8s.io/$c:$KUBE_VERSION" "[\"/usr/local/bin/$c\"]" "$cp/$c:usr/local/bin/$c" >&2
  done
  echo "$KPROXY_IMAGE"
  net_image "$KPROXY_IMAGE" '["/usr/local/bin/kube-proxy"]' "$cp/kube-proxy:usr/local/bin/kube-proxy" >&2
  echo "$KUBE_ROUTER_IMAGE"
  net_image "$KUBE_ROUTER_IMAGE" '["/usr/local/bin/kube-router"]' "$BIN/kube-router-$KUBE_ROUTER_VERSION/kube-router:usr/local/bin/kube-router" >&2
  echo "$LPP_IMAGE"
  static_image "$LPP_IMAGE" '["/usr/local/bin/local-path-provisioner"]' \
    "$BIN/local-path-provisioner-$LPP_VERSION/local-path-provisioner:usr/local/bin/local-path-provisioner" >&2
  # The provisioner's helper pod runs sh, mkdir, rm: the Debian root has them.
  echo "$HELPER_IMAGE"
  net_image "$HELPER_IMAGE" '[]' >&2
}

KIND_SRC=""
kind_src() {
  [ -n "$KIND_SRC" ] || KIND_SRC="$(cd /tmp && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  echo "$KIND_SRC"
}

# The base: a Debian root with systemd, kind's node files (images/base/files of the kind
# module), containerd 2, runc (Debian's), crictl, CNI plugins, kind-runc, kubelet/kubeadm/kubectl.
node_rootfs() {
  local dir=$1 ks cp root; ks="$(kind_src)"; cp="$(control_plane_bin)"
  root="$(rootfs node "$NODE_PKGS")"
  cp -a "$root/." "$dir/"
  # kind's base image layout (its Dockerfile's COPY lines), from the module's files.
  install -m 0755 "$ks"/images/base/files/usr/local/bin/* "$dir/usr/local/bin/"
  mkdir -p "$dir/kind/bin" "$dir/etc/containerd" "$dir/etc/systemd/system/kubelet.service.d" "$dir/etc/kubernetes/manifests" "$dir/opt/cni/bin"
  cp -r "$ks/images/base/files/kind/." "$dir/kind/"
  chmod 0755 "$dir/kind" "$dir/kind/bin" "$dir"/kind/bin/*
  (cd "$ks/images/base/files/etc" && find . -type f | while read -r f; do install -D -m 0644 "$f" "$dir/etc/$f"; done)
  # The Dockerfile's clean-ups and unit choices.
  find "$dir/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$dir"/lib/systemd/system/multi-user.target.wants/* "$dir"/etc/systemd/system/*.wants/* \
    "$dir"/lib/systemd/system/local-fs.target.wants/* "$dir"/lib/systemd/system/sockets.target.wants/*udev* \
    "$dir"/lib/systemd/system/sockets.target.wants/*initctl* "$dir"/lib/systemd/system/basic.target.wants/*
  echo ReadKMsg=no >>"$dir/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$dir/sbin/init"
  # Binaries.
  local d="$BIN/containerd-$CONTAINERD_VERSION" p
  install -m 0755 "$d/containerd" "$d/containerd-shim-runc-v2" "$d/ctr" "$BIN/crictl-$CRICTL_VERSION/crictl" "$BIN/kind-runc" "$dir/usr/local/bin/"
  install -m 0755 "$BIN/cni-plugins-$CNI_PLUGINS_VERSION"/* "$dir/opt/cni/bin/"
  install -m 0755 "$cp/kubelet" "$cp/kubeadm" "$cp/kubectl" "$dir/usr/bin/"
  ln -sf /usr/sbin/runc "$dir/usr/local/sbin/runc"
  chroot "$dir" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$dir" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  # containerd's default spec, without rlimits, with kind's createContainer hook.
  chroot "$dir" sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer|length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" >/etc/containerd/cri-base.json'
  # Our containerd settings: the pause image built here, and kind-runc in front of runc for
  # every pod (privileged pods ask for CAP_SYS_RESOURCE, which the node cannot grant).
  sed -i "s|sandbox_image = .*|sandbox_image = \"registry.k8s.io/pause:$PAUSE_VERSION\"|" "$dir/etc/containerd/config.toml"
  sed -i 's|^\(\s*\)SystemdCgroup = true|&\n\1BinaryName = "/usr/local/bin/kind-runc"|' "$dir/etc/containerd/config.toml"
  grep -q 'BinaryName = "/usr/local/bin/kind-runc"' "$dir/etc/containerd/config.toml" || die "containerd config: no SystemdCgroup line to put BinaryName beside"
  echo "$KUBE_VERSION" >"$dir/kind/version"
  mkdir -p "$dir/kind/manifests"
  install -m 0644 "$REPO/e2e/cluster/kindmanifests/default-cni.yaml" "$REPO/e2e/cluster/kindmanifests/default-storage.yaml" "$dir/kind/manifests/"
}

# base_stamp: a digest of what goes into the node's base image (its root filesystem, named by
# its packages; the binaries; kind-runc; the manifests; this script up to its Polyaxon part),
# kept as an image label so that a change of any of them makes the image again.
base_stamp() {
  local cp; cp="$(control_plane_bin)"
  { rootfs node "$NODE_PKGS"
    cat "$BIN/kind-runc" "$cp/kubelet" "$cp/kubeadm" "$cp/kubectl" "$BIN/containerd-$CONTAINERD_VERSION"/* \
      "$BIN/crictl-$CRICTL_VERSION/crictl" "$BIN/cni-plugins-$CNI_PLUGINS_VERSION"/* "$REPO"/e2e/cluster/kindmanifests/*.yaml
    sed '/^# --- Polyaxon.s images/,$d' "$REPO/e2e/scripts/build-kind-images.sh"; } | sha256sum | cut -c1-16
}
STAMP_LABEL=dev.polyaxon-deploy.kind-inputs
stamped() { [ "$(docker image inspect --format "{{index .Config.Labels \"$STAMP_LABEL\"}}" "$1" 2>/dev/null)" = "$2" ]; }

build_node_image() {
  local base="polyaxon-deploy/kind-base:$KUBE_VERSION" d id imgs stamp base_st
  # The node image: its base and the images it preloads (each stamped by its own inputs).
  imgs=$(preload_images)
  base_st="$(base_stamp)"
  # shellcheck disable=SC2086 # one image a word
  stamp="$({ echo "$base_st"; docker image inspect --format '{{.Id}}' $imgs; } | sha256sum | cut -c1-16)"
  stamped "$NODE_IMAGE" "$stamp" && return 0
  if ! stamped "$base" "$base_st"; then
    d="$(mktemp -d)"
    node_rootfs "$d"
    import_dir "$base" "$d" --change "LABEL $STAMP_LABEL=$base_st" --change 'ENV container=docker' --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]'
    rm -rf "$d"
  fi
  # Preload: a containerd inside a build container imports each image's archive (content only,
  # as kind's node-image build does), then the container is committed.
  id=$(docker run -d --entrypoint sleep --security-opt seccomp=unconfined "$base" infinity)
  trap "docker rm -f $id >/dev/null 2>&1 || true" EXIT
  docker exec -d "$id" sh -c 'containerd >/var/log/containerd-build.log 2>&1'
  for _ in $(seq 30); do docker exec "$id" ctr version >/dev/null 2>&1 && break; sleep 1; done
  local img
  for img in $imgs; do
    docker save "$img" | docker exec -i "$id" ctr --namespace=k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --no-unpack --digests - >/dev/null
  done
  docker exec "$id" ctr --namespace=k8s.io images list -q >&2
  docker exec "$id" sh -c 'kill $(pidof containerd); sleep 1; rm -f /var/log/containerd-build.log' || true
  # Docker 20.10 takes STOPSIGNAL in neither import nor commit: kind removes nodes with rm -f.
  docker commit --change "LABEL $STAMP_LABEL=$stamp" --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$id" "$NODE_IMAGE" >/dev/null
  docker rm -f "$id" >/dev/null; trap - EXIT
  log "image $NODE_IMAGE"
}

# --- Polyaxon's images and their dependencies -----------------------------------------------
# shellcheck source=kind-images/polyaxon-images.sh
. "$(dirname "$0")/kind-images/polyaxon-images.sh"
. "$(dirname "$0")/kind-images/monitoring-images.sh"
. "$(dirname "$0")/kind-images/cloudnativepg-images.sh"

case "${1:-build}" in
  docker) start_docker ;;
  stop) stop_docker ;;
  env) echo "export DOCKER_HOST=$DOCKER_HOST" ;;
  preflight) preflight ;;
  polyaxon)
    start_docker
    mkdir -p "$CACHE"
    build_polyaxon_images
    ;;
  cloudnativepg)
    start_docker
    mkdir -p "$CACHE"
    build_cloudnativepg_images
    ;;
  build)
    start_docker
    mkdir -p "$CACHE"
    step "Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION (build-binaries.sh)" control_plane_bin >/dev/null
    step "Go programs (containerd, crictl, CNI plugins, CoreDNS, kube-router, local-path-provisioner)" build_go
    step "pause" build_pause
    step "node root filesystem (debootstrap)" rootfs node "$NODE_PKGS" >/dev/null
    step "node image $NODE_IMAGE" build_node_image
    echo "$NODE_IMAGE"
    ;;
  if-possible)
    if ! why="$(preflight 2>&1)"; then
      echo "$why" >&2
      log "skipped: the kind scenario will say that kind was not tested"
      exit 0
    fi
    # The root filesystems (network and disk) beside the Go builds (CPU); a root either needs
    # waits for the other's lock. debootstrap is installed first, once.
    ensure_packages
    "$0" roots & roots=$!
    "$0" build >/dev/null
    wait "$roots" || die "making the root filesystems failed"
    "$0" polyaxon >/dev/null
    ;;
  roots)
    ensure_packages
    mkdir -p "$CACHE"
    step "root filesystems (debootstrap)" make_roots
    ;;
  *) die "unknown command $1 (build|docker|stop|env|preflight|polyaxon|cloudnativepg|roots|if-possible)" ;;
esac
