#!/usr/bin/env bash
# make demo / make demo-down: a production-shaped cluster with Polyaxon installed on it.
#
#   bash e2e/scripts/demo.sh up     create the demo cluster (kind when Docker answers, else the
#                                   local control plane + kwok, where Polyaxon's own programs run
#                                   for the platform's pods and a real PostgreSQL answers for the
#                                   Postgres pod), install --profile production, print the release
#                                   status and which pod runs on which node pool, and the commands
#                                   to try next; on the local provider, the last two lines are the
#                                   exports for Polyaxon's CLI (POLYAXON_HOST) and PATH
#   bash e2e/scripts/demo.sh down   delete the demo cluster, stop the programs and its PostgreSQL
#
# `up` expects bin/polyaxon-deploy (make build), the control-plane binaries
# (e2e/scripts/build-binaries.sh, or $POLYAXON_DEPLOY_BIN_DIR) and Polyaxon's virtual
# environment (e2e/scripts/install-polyaxon.sh, or $POLYAXON_DEPLOY_VENV); make demo runs all
# three first. Running `up` again reuses the cluster and the release, and restarts what stopped.
# DEMO_PROVIDER=local|kind|auto chooses the provider (default: E2E_PROVIDER, else local). On
# kind (docs/kind-offline.md), e2e/scripts/build-kind-images.sh starts its private Docker
# engine and builds or reuses every image first; nothing is pulled.
# DEMO_POSTGRES=statefulset|cloudnativepg chooses the Postgres of a new demo cluster (default:
# the existing cluster's, else statefulset). cloudnativepg runs on kind only: three core nodes,
# CloudNativePG's operator and the instances' image built here (build-kind-images.sh
# cloudnativepg), and the install with values/cloudnativepg.yaml (a Cluster of three instances).
# DEMO_ARTIFACTS=volume|s3 chooses the artifacts store of a new demo cluster (default: the
# existing cluster's, else volume: a directory every node sees, behind the chart's claims). s3
# is a bucket of an S3 store run for the demo (versitygw, `e2ecluster s3store`, in namespace
# s3): on the local provider the runs' own Python containers and Polyaxon's sidecar then run on
# this machine, so a run's outputs and logs land in the bucket; `up` ends with how to list it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LC_ALL=C # sort and join must agree on the order

BIN="${DEMO_BIN:-bin/polyaxon-deploy}" # DEMO_BIN: try another build of the binary
NAMESPACE=polyaxon
RUNS_NAMESPACE=polyaxon-runs # the production profile's runs.namespace: where Polyaxon's agent sends runs

say() { printf '\n==> %s\n' "$*"; }

# e2ecluster is the demo cluster's command, built at each run of this script: the hosts
# daemon it starts runs from this binary (renamed into place, never rewritten under it).
E2ECLUSTER=bin/e2ecluster
build_e2ecluster() {
  mkdir -p bin
  go build -o "$E2ECLUSTER.new" ./e2e/cmd/e2ecluster
  mv -f "$E2ECLUSTER.new" "$E2ECLUSTER"
}

up() {
  if [ ! -x "$BIN" ]; then
    echo "demo: $BIN not found: run 'make build' first (or 'make demo', which builds it)" >&2
    exit 1
  fi
  local kubectl
  kubectl="${POLYAXON_DEPLOY_BIN_DIR:-$(bash e2e/scripts/build-binaries.sh)}/kubectl"
  build_e2ecluster

  local choice="${DEMO_PROVIDER:-${E2E_PROVIDER:-local}}" load=() store=()
  case "${DEMO_ARTIFACTS:-}" in
    "") ;;
    volume | s3) store=(--artifacts "$DEMO_ARTIFACTS") ;;
    *) echo "demo: DEMO_ARTIFACTS=$DEMO_ARTIFACTS: volume or s3" >&2; exit 2 ;;
  esac
  case "${DEMO_POSTGRES:-}" in
    "" | statefulset) ;;
    cloudnativepg)
      [ "$choice" = kind ] || { echo "demo: DEMO_POSTGRES=cloudnativepg runs on kind only: E2E_PROVIDER=kind" >&2; exit 2; } ;;
    *) echo "demo: DEMO_POSTGRES=$DEMO_POSTGRES: statefulset or cloudnativepg" >&2; exit 2 ;;
  esac
  local postgres=()
  [ -z "${DEMO_POSTGRES:-}" ] || postgres=(--postgres "$DEMO_POSTGRES")
  local counts="core x2, experiments x2 with GPUs and a nvidia.com/gpu taint, builds x1"
  if [ "$choice" = kind ]; then
    kind_images
    counts="core, experiments with GPUs and a nvidia.com/gpu taint, builds: one node each"
    [ "${DEMO_POSTGRES:-}" != cloudnativepg ] || counts="core x3 (a Postgres instance each), experiments with GPUs and a nvidia.com/gpu taint, builds x1"
  fi
  say "Creating the demo cluster (node pools: $counts)"
  "$E2ECLUSTER" up --provider "$choice" --namespace "$NAMESPACE" "${load[@]}" "${store[@]}" "${postgres[@]}" >/dev/null
  local provider kubeconfig postgres_password_file="" venv="" namespace hosts_log="" artifacts=volume postgres_mode=statefulset
  local gw_url="" gw_ca="" gw_ns="" gw_name="" gw_listener=""
  local demo_user="" demo_password="" demo_secret=""
  eval "$("$E2ECLUSTER" env)"
  local kc="$kubeconfig"
  local k=("$kubectl" --kubeconfig "$kc")
  "${k[@]}" get nodes -L polyaxon

  # On the local provider Polyaxon's own programs run for the platform's pods (haupt's API,
  # the agent, the operator stand-in: e2e/cluster/local/doc.go), against the real PostgreSQL behind
  # the Postgres pod, as the chart's user and database with that server's password. Celery
  # and its broker are not run here: with scheduler.enabled=false Polyaxon runs its tasks
  # inline in the API, so the scheduler, RabbitMQ and Redis are left out.
  local values=()
  if [ "$provider" = local ]; then
    values=(--set-file "postgresql.auth.password=$postgres_password_file"
      --set scheduler.enabled=false --set rabbitmq.enabled=false --set redis.enabled=false
      # Distributed runs: the hosts daemon runs the Kubeflow training operator (tfjob and
      # pytorchjob, for namespace polyaxon-runs) and served its CRDs before the install.
      --set operators.tfjob=true --set operators.pytorchjob=true)
    if [ "$artifacts" = volume ]; then
      # One artifacts store for the gateway and the runs' namespace: a directory beside the
      # cluster's files stands for the NFS export a production cluster would name.
      values+=(--set "artifactsStore.persistence.sharedVolume.hostPath.path=${kc%/*}/artifacts")
    fi
    # A real Gateway API implementation in front of the gateway: Traefik, run by the hosts
    # daemon with the Gateway API CRDs and an HTTPS listener whose certificate (of a CA made
    # when the daemon started) it terminates; the chart's HTTPRoute attaches to it.
    say "The Gateway (Traefik, Gateway API; e2e/scripts/build-traefik.sh builds it the first time)"
    local gw
    gw="$("$E2ECLUSTER" https --wait 15m)"
    use_gateway "$gw"
    # The production profile puts the authenticating edge (oauth2-proxy, run by the hosts
    # daemon) in front of the route: the demo's one user logs in with an htpasswd entry.
    say "The demo's user of the authenticating edge (an htpasswd Secret, made once)"
    { read -r demo_user; read -r demo_password; read -r demo_secret; } <<<"$("$E2ECLUSTER" demo-user --namespace "$NAMESPACE")"
    echo "  Secret $NAMESPACE/$demo_secret, user $demo_user"
    values+=(--set "edge.htpasswd.secretName=$demo_secret")
  fi
  if [ "$provider" = kind ]; then
    # Postgres 15 and Redis 7.0 from Debian's packages, and the artifacts store on a directory
    # every node mounts: values/kind-demo.yaml says why.
    values=(-f values/kind-demo.yaml)
    # The Gateway: Traefik in a pod of the core node (e2ecluster up started it), reached here
    # through a port-forward to its Service. No authenticating edge on kind: its oauth2-proxy
    # runs on the local demo only, so the route goes to the gateway itself.
    say "The Gateway (Traefik in a pod of the core node, Gateway API)"
    local gw
    gw="$("$E2ECLUSTER" kind-https --kubectl "$kubectl" --wait 5m)"
    use_gateway "$gw"
    values+=(--set edge.enabled=false)
    if [ "$postgres_mode" = cloudnativepg ]; then
      # A Cluster of three instances, one per core node, the platform on its read-write Service.
      values+=(-f values/cloudnativepg.yaml --set postgresql.persistence.size=1Gi)
    fi
  fi
  if [ "$artifacts" = s3 ]; then
    # The store in the cluster (on the local provider the hosts daemon runs versitygw for its
    # pod), an account and the bucket it owns, its keys and endpoint in Secret polyaxon-s3:
    # the install checks that Secret, and the values name it (artifactsStore.kind: s3).
    say "The artifacts store: a bucket of the demo's S3 store (versitygw in namespace s3)"
    local s3_values
    s3_values="$("$E2ECLUSTER" s3store up --namespace "$NAMESPACE" --kubectl "$kubectl")"
    echo "  values: $s3_values"
    values+=(-f "$s3_values")
  fi
  if "$BIN" status --kubeconfig "$kc" -n "$NAMESPACE" >/dev/null 2>&1; then
    say "Release polyaxon is already installed in this cluster: skipping the install"
  else
    say "polyaxon-deploy install --profile production ${values[*]}"
    "$BIN" install --profile production --kubeconfig "$kc" -n "$NAMESPACE" "${values[@]}"
  fi

  say "polyaxon-deploy status"
  local status
  status="$("$BIN" status --kubeconfig "$kc" -n "$NAMESPACE")"
  printf '%s\n' "$status"
  # status shows each pod's node and node pool; older binaries did not.
  if ! grep -q '^POD .*NODE' <<<"$status"; then
    say "Which pod runs on which node pool"
    pod_pools "${k[@]}"
  fi

  if [ "$artifacts" = s3 ]; then
    # The release made the runs' namespace: their init containers and sidecars read the same
    # Secret there.
    "$E2ECLUSTER" s3store secret --namespace "$RUNS_NAMESPACE"
    say "The artifacts store: the S3 store's pod, and Secret polyaxon-s3 in $NAMESPACE and $RUNS_NAMESPACE"
    "${k[@]}" -n s3 get pods -o wide
    "${k[@]}" -n "$NAMESPACE" get secret polyaxon-s3
    "${k[@]}" -n "$RUNS_NAMESPACE" get secret polyaxon-s3 --no-headers
  else
    say "The artifacts store's claims: the gateway's, and the runs' own of the same name in $RUNS_NAMESPACE"
    "${k[@]}" -n "$NAMESPACE" get pvc polyaxon-artifacts
    "${k[@]}" -n "$RUNS_NAMESPACE" get pvc polyaxon-artifacts --no-headers
  fi

  run_pod "${k[@]}"

  local host=""
  if [ "$provider" = local ]; then
    say "Polyaxon's API behind the gateway Service (haupt on this machine; the programs' log: $hosts_log)"
    host="$("$E2ECLUSTER" gateway --wait 5m)"
    echo "  $host/api/v1/installation answers"
    echo "  $host/ui/ is Polyaxon's web UI (haupt serves its files: docs/development.md, host rewrites)"
    if [ -n "$gw_url" ]; then
      say "Through the Gateway over https (the chart's HTTPRoute; Traefik terminates TLS)"
      route_status "${k[@]}"
      echo "  $gw_url/ui/ in a browser that trusts $gw_ca: log in as $demo_user, password $demo_password"
      echo "  curl --cacert $gw_ca -u $demo_user:$demo_password $gw_url/api/v1/installation"
      echo "  (without a login the edge answers 401 or its sign-in page; the two lines at the end reach"
      echo "  the gateway Service inside the cluster, as kubectl port-forward does for administrators)"
    fi
    say "Distributed runs: the Kubeflow training operator (tfjob, pytorchjob) runs for $RUNS_NAMESPACE (its log: ${hosts_log%/*}/training-operator/)"
    echo "  polyaxon run -f values/polyaxonfiles/distributed-tf.yaml -p demo        seed 001: 1 chief, 7 workers, 3 ps on the GPU pool"
    echo "  polyaxon run -f values/polyaxonfiles/distributed-pytorch.yaml -p demo   1 master, 3 workers"
    echo "  kubectl -n $RUNS_NAMESPACE get pods -o wide -l app.kubernetes.io/part-of=polyaxon-runs"
  fi

  if [ "$provider" = kind ]; then
    say "Polyaxon's API behind the gateway Service, through kubectl port-forward (its log: ${kc%/*}/kind-forward.log)"
    host="$("$E2ECLUSTER" kind-gateway --kubectl "$kubectl" --namespace "$NAMESPACE" --wait 10m)"
    echo "  $host/api/v1/installation answers; the platform's pods are real containers on kind's nodes"
    echo "  kubectl get nodes -o wide; kubectl -n $NAMESPACE get pods -o wide"
    say "Through the Gateway over https (the chart's HTTPRoute; Traefik terminates TLS in the cluster)"
    route_status "${k[@]}"
    echo "  $gw_url/ui/ in a browser that trusts $gw_ca"
    echo "  curl --cacert $gw_ca $gw_url/api/v1/installation"
    venv="$(bash e2e/scripts/install-polyaxon.sh)" # Polyaxon's CLI, for the export lines
  fi

  if [ "$artifacts" = s3 ]; then
    say "Runs' artifacts in the bucket: Polyaxon's sidecar uploads each run's outputs and logs under s3://polyaxon-artifacts/<run uuid>/"
    echo "  polyaxon run -f e2e/testdata/polyaxonfiles/s3-outputs.yaml -p demo   a run that writes outputs/model.txt (after polyaxon project create --name demo)"
    echo "  $E2ECLUSTER s3store ls                                             the bucket's objects: time (UTC), size, URL"
    echo "  eval \"\$($E2ECLUSTER s3store env)\"; aws s3 ls --recursive s3://polyaxon-artifacts   with an S3 client of your own"
  fi

  say "The demo cluster is up"
  cat <<EOF
  kubectl:   export KUBECONFIG=$kc   (kubectl is at $kubectl)
  Tear down: make demo-down

==> Try next (README.md, "Try it on the demo cluster"; from the repository root):
EOF
  try_next
  if [ -n "$host" ]; then
    # Last, to be pasted as they are: Polyaxon's CLI finds the API through POLYAXON_HOST (the
    # gateway Service's address on this machine), and runs from Polyaxon's virtual
    # environment; kubectl is the control plane's.
    say "For Polyaxon's CLI and kubectl in your shell, paste these two lines:"
    echo "export POLYAXON_HOST=$host"
    echo "export PATH=$venv/bin:$(dirname "$kubectl"):\$PATH"
  fi
}

# use_gateway LINES: the Gateway that `e2ecluster https` or `kind-https` printed (URL, CA file,
# namespace, name, listener) into the caller's gw_* variables, and the chart's route to it
# appended to the caller's values.
use_gateway() {
  { read -r gw_url; read -r gw_ca; read -r gw_ns; read -r gw_name; read -r gw_listener; } <<<"$1"
  echo "  Gateway $gw_ns/$gw_name, listener $gw_listener: $gw_url (CA: $gw_ca)"
  values+=(--set httpRoute.enabled=true --set "httpRoute.parentRefs[0].name=$gw_name"
    --set "httpRoute.parentRefs[0].namespace=$gw_ns" --set "httpRoute.parentRefs[0].sectionName=$gw_listener"
    --set "httpRoute.hostnames[0]=localhost")
}

# route_status KUBECTL...: the chart's HTTPRoute and what its Gateway's controller says of it.
route_status() {
  "$@" -n "$NAMESPACE" get httproute polyaxon-gateway \
    -o custom-columns='ROUTE:.metadata.name,PARENT:.status.parents[*].parentRef.name,ACCEPTED:.status.parents[*].conditions[?(@.type=="Accepted")].status,RESOLVED REFS:.status.parents[*].conditions[?(@.type=="ResolvedRefs")].status' || true
}

# kind_images: the private Docker engine (Debian's docker.io installed when missing) and every
# image of the kind demo, built or reused (e2e/scripts/build-kind-images.sh, which first checks
# that this machine can run kind's nodes); sets load to the images e2ecluster loads into the
# nodes (with Traefik's, run as the Gateway's data plane, and the Gateway API CRDs), and
# DOCKER_HOST to the private engine.
kind_images() {
  say "kind: the private Docker engine and the images, built here (e2e/scripts/build-kind-images.sh; cached after the first run)"
  bash e2e/scripts/build-kind-images.sh build >/dev/null
  local img
  for img in $(bash e2e/scripts/build-kind-images.sh polyaxon); do
    load+=(--load "$img")
    case "$img" in traefik:*) load+=(--gateway-image "$img") ;; esac
  done
  load+=(--gateway-crds "$(bash e2e/scripts/build-traefik.sh | sed -n 2p)")
  eval "$(bash e2e/scripts/build-kind-images.sh env)"
}

# try_next prints the README's demo commands: its first sh block marked <!-- demo-commands -->.
# Printing them from the README keeps this list and the README one list, which a test runs.
try_next() {
  awk '/^<!-- demo-commands/ {marked = 1; next}
       marked && /^```sh/ {inside = 1; next}
       inside && /^```/ {exit}
       inside {print "  " $0}' README.md
}

# run_pod KUBECTL...: a run pod as Polyaxon 2.15 creates it (e2e/testdata/runpods/experiment.yaml:
# a PyTorch worker with no scheduling and no securityContext of its own), in the runs' own
# namespace, is admitted by its restricted Pod Security after the API server's policies placed
# and hardened it.
run_pod() {
  say "A Polyaxon run pod in namespace $RUNS_NAMESPACE, admitted, placed and hardened by the API server (then deleted)"
  # With the artifacts in a bucket there is no claim (the runs' policy refuses one): the
  # store's volume is an emptyDir.
  local store_volume='s/STORE_CLAIM/polyaxon-artifacts/'
  [ "${artifacts:-volume}" = s3 ] && store_volume='s/persistentVolumeClaim: {claimName: STORE_CLAIM}/emptyDir: {}/'
  sed -e 's/RUNS_SA/polyaxon-runs/; s/STORE_NAME/artifacts/; s#STORE_PATH#/plx-artifacts#' -e "$store_volume" \
    -e 's/generateName: plx-operation-ddp-resnet-/name: demo-run/' e2e/testdata/runpods/experiment.yaml |
    "$@" -n "$RUNS_NAMESPACE" apply -f - >/dev/null
  "$@" -n "$RUNS_NAMESPACE" wait --for=condition=PodScheduled pod/demo-run --timeout=60s >/dev/null
  "$@" -n "$RUNS_NAMESPACE" get pod demo-run --no-headers -o custom-columns='RUN POD:.metadata.name,NODE:.spec.nodeName,NODE SELECTOR:.spec.nodeSelector,TOLERATES:.spec.tolerations[*].key,RUN AS:.spec.securityContext.runAsUser,INIT CONTAINERS NO ESCALATION:.spec.initContainers[*].securityContext.allowPrivilegeEscalation' |
    { printf 'RUN POD\tNODE\tNODE SELECTOR\tTOLERATES\tRUN AS\tINIT CONTAINERS NO ESCALATION\n'; tr -s ' ' '\t'; } | column -t -s $'\t'
  "$@" -n "$RUNS_NAMESPACE" delete pod demo-run --wait=false >/dev/null
}

# pod_pools KUBECTL...: a table of the release's pods, their nodes and node pools.
pod_pools() {
  {
    printf 'POD\tCOMPONENT\tNODE\tNODE POOL\tSTATUS\n'
    join -t $'\t' -1 3 -2 1 -o 1.1,1.2,1.3,2.2,1.4 \
      <("$@" -n "$NAMESPACE" get pods --no-headers \
          -o custom-columns='POD:.metadata.name,COMPONENT:.metadata.labels.app\.kubernetes\.io/component,NODE:.spec.nodeName,STATUS:.status.phase' |
        awk -v OFS='\t' '{print $1, $2, $3, $4}' | sort -t $'\t' -k 3,3) \
      <("$@" get nodes --no-headers -o custom-columns='NODE:.metadata.name,POOL:.metadata.labels.polyaxon' |
        awk -v OFS='\t' '{print $1, $2}' | sort -t $'\t' -k 1,1) |
      sort -t $'\t' -k 4,4 -k 2,2 -k 1,1
  } | column -t -s $'\t'
}

down() {
  build_e2ecluster
  "$E2ECLUSTER" down
  echo "demo: torn down (Polyaxon's programs, the cluster and its PostgreSQL)"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
