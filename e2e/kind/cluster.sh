#!/usr/bin/env bash
# A multi-node Kubernetes in Docker (kind) built entirely offline: our kind binary, our node image.
#   e2e/kind/cluster.sh up [NODES]        1 control plane + NODES-1 workers (default 3 nodes); loads the
#                                         project's built images; idempotent (reuses a running cluster)
#   e2e/kind/cluster.sh down              deletes the cluster
#   e2e/kind/cluster.sh load IMAGE...     `kind load docker-image` into every node
#   e2e/kind/cluster.sh status | kubeconfig | ready
# `ready` exits 0 when kind, kindnetd, kube-router and the node image are all cached (nothing to build), so that CI
# can run the kind tier only on a warm cache. The kubeconfig is written to $KIND_STATE/kubeconfig and
# copied to .data/kind/kubeconfig.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E=$(cd "$HERE/.." && pwd)
REPO=$(cd "$E2E/.." && pwd)
# shellcheck source=/dev/null
. "$E2E/versions.env"
CACHE=${ROCKETCLUSTER_CACHE:-$HOME/.cache/rocketcluster}
STATE=${KIND_STATE:-/var/lib/rocketcluster/kind}
NAME=${KIND_CLUSTER_NAME:-rocketcluster}
KUBECONFIG_OUT=$STATE/kubeconfig
KIND=$CACHE/kind-$KIND_VERSION/bin/kind
# kind runs `docker`: Debian's client, the same release as the engine images/build.sh starts.
export PATH=/usr/bin:$PATH
log() { printf '[kind %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

config() { # NODES: kind's cluster config, and the kubeadm patch that points it at our images
  local n=$1 i
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
EOF
  for ((i = 1; i < n; i++)); do echo "- role: worker"; done
  cat <<EOF
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  imageRepository: rocketcluster.local
  etcd:
    local:
      imageTag: ${ETCD_VERSION#v}-0
  dns:
    imageTag: $COREDNS_VERSION
EOF
}

exists() { "$KIND" get clusters 2>/dev/null | grep -qx "$NAME"; }

publish_kubeconfig() {
  mkdir -p "$STATE" "$REPO/.data/kind"
  "$KIND" get kubeconfig --name "$NAME" >"$KUBECONFIG_OUT.new"
  mv "$KUBECONFIG_OUT.new" "$KUBECONFIG_OUT"
  cp "$KUBECONFIG_OUT" "$REPO/.data/kind/kubeconfig"
}

pod_routes() { # add|del: route each node's pod CIDR via the node, so host processes (the operator
  # run by the tests) reach pod IPs, as on the host-process harness
  local op=$1 kc="$CACHE/kubernetes-$K8S_VERSION/bin/kubectl --kubeconfig $KUBECONFIG_OUT"
  local cidr ip
  while read -r cidr ip; do
    [[ -n $cidr && -n $ip ]] || continue
    if [[ $op == add ]]; then ip route replace "$cidr" via "$ip"; else ip route del "$cidr" via "$ip" 2>/dev/null || true; fi
  done < <($kc get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>/dev/null)
}

healthy() { # every node container runs, still has the address its node registered, and the API answers.
  # A restart of the Docker engine stops kind's containers or gives them new addresses, and a cluster
  # left by an earlier run must then be made anew rather than reused.
  local node running ip registered kc="$CACHE/kubernetes-$K8S_VERSION/bin/kubectl"
  for node in $("$KIND" get nodes --name "$NAME" 2>/dev/null); do
    running=$(/usr/bin/docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null || echo false)
    [[ $running == true ]] || { log "node $node is not running"; return 1; }
  done
  publish_kubeconfig 2>/dev/null || { log "no kubeconfig from the control plane"; return 1; }
  timeout 30 "$kc" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz >/dev/null 2>&1 ||
    { log "the API server does not answer"; return 1; }
  for node in $("$KIND" get nodes --name "$NAME"); do
    ip=$(/usr/bin/docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$node")
    registered=$("$kc" --kubeconfig "$KUBECONFIG_OUT" get node "$node" \
      -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}' 2>/dev/null || true)
    [[ $ip == "$registered" ]] || { log "node $node has address $ip, registered as '$registered'"; return 1; }
  done
}

load() {
  local img
  for img in "$@"; do
    /usr/bin/docker image inspect "$img" >/dev/null 2>&1 || { log "skip $img: not built (make images)"; continue; }
    log "kind load docker-image $img"
    "$KIND" load docker-image --name "$NAME" "$img" >&2
  done
}

up() {
  local nodes=${1:-3} image t0=$SECONDS
  [[ $nodes =~ ^[1-9][0-9]?$ ]] || die "NODES must be 1..99, got '$nodes'"
  bash "$E2E/deps.sh" images
  bash "$E2E/build.sh" kind >&2
  image=$(bash "$HERE/build-node.sh")
  if exists && ! healthy; then
    log "cluster $NAME exists but is not healthy (above): deleting it to start afresh"
    down
  fi
  if exists; then
    local have
    have=$("$KIND" get nodes --name "$NAME" | wc -l)
    [[ $have == "$nodes" ]] || die "cluster $NAME runs $have nodes, not $nodes: make kind-down first"
    log "cluster $NAME is already up ($have nodes)"
  else
    mkdir -p "$STATE"
    config "$nodes" >"$STATE/config.yaml"
    log "creating $NAME: $nodes nodes from $image"
    local t1=$SECONDS
    "$KIND" create cluster --name "$NAME" --image "$image" --config "$STATE/config.yaml" \
      --kubeconfig "$STATE/kubeconfig.create" --wait 180s >&2
    rm -f "$STATE/kubeconfig.create"
    log "kind create cluster took $((SECONDS - t1))s"
  fi
  publish_kubeconfig
  pod_routes add
  # shellcheck disable=SC2046
  load $(cat /var/lib/rocketcluster/images/built.txt 2>/dev/null | grep -v spark || true)
  log "up in $((SECONDS - t0))s"
  echo "$KUBECONFIG_OUT"
}

down() {
  [[ -x $KIND ]] || return 0
  if exists; then
    [[ -f $KUBECONFIG_OUT ]] && pod_routes del
    "$KIND" delete cluster --name "$NAME" >&2
  fi
  rm -f "$KUBECONFIG_OUT" "$REPO/.data/kind/kubeconfig"
}

ready() { # the kind tier has nothing left to build
  [[ -f $CACHE/kind-$KIND_VERSION/.complete && -f $CACHE/kube-router-$KUBE_ROUTER_VERSION/.complete ]] &&
    bash "$HERE/build-node.sh" cached
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  load) shift; exists || die "no kind cluster $NAME (make kind-up)"; load "$@" ;;
  status) [[ -x $KIND ]] && exists && "$KIND" get nodes --name "$NAME" || echo "no kind cluster $NAME" ;;
  kubeconfig) exists || die "no kind cluster $NAME"; publish_kubeconfig; echo "$KUBECONFIG_OUT" ;;
  ready) ready ;;
  *) die "usage: $0 up [NODES] | down | load IMAGE... | status | kubeconfig | ready" ;;
esac
