#!/usr/bin/env bash
# Build (or reuse from cache) the Kubernetes components the e2e harness runs.
#   e2e/build.sh [all|control-plane|node|kubernetes|etcd|coredns|local-path|helm|pause|kubeadm|kind|kindnetd|crictl|kube-router]...
# Binaries land in ~/.cache/rocketcluster/<component>-<version>/bin; nothing built goes into the repo.
# Builds run with `nice -n 19` and a small -p so they share the machine politely.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$HERE/versions.env"
CACHE=${ROCKETCLUSTER_CACHE:-$HOME/.cache/rocketcluster}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
export GOFLAGS="${GOFLAGS:--p=2}" CGO_ENABLED=0 GOTOOLCHAIN=local
NICE="nice -n 19"

log() { printf '[build %s] %s\n' "$(date +%T)" "$*" >&2; }

# cached NAME DIR FUNC: unless DIR is complete, run FUNC into a temp dir, then move it to DIR.
cached() {
  local name=$1 dir=$2 fn=$3 lock
  if [[ -f $dir/.complete ]]; then log "$name: cached in $dir"; return 0; fi
  mkdir -p "$(dirname "$dir")"
  exec {lock}>"$dir.lock"
  flock "$lock"   # one build per component at a time; a second caller waits, then reuses it
  if [[ -f $dir/.complete ]]; then log "$name: cached in $dir"; exec {lock}>&-; return 0; fi
  local tmp="$dir.tmp.$$"
  rm -rf "$dir".tmp.*; mkdir -p "$tmp/bin"
  local t0=$SECONDS
  log "$name: building into $dir"
  "$fn" "$tmp/bin"
  echo "built $(date -u +%FT%TZ) in $((SECONDS - t0))s" > "$tmp/.complete"
  rm -rf "$dir"; mv "$tmp" "$dir"
  exec {lock}>&-
  log "$name: done in $((SECONDS - t0))s"
}

build_kubernetes() {
  local out=$1 minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local x="gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean buildDate=1970-01-01T00:00:00Z"
  local ld="-s -w" kv
  for kv in $x; do
    ld+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  (cd "$HERE/gomod" && $NICE "$GO" build -trimpath -ldflags="$ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
}

# kubeadm only runs inside kind's node image (e2e/kind/), so it is its own component: adding it did not
# invalidate the cached control-plane binaries. Same module, same version ldflags.
build_kubeadm() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local x="gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean buildDate=1970-01-01T00:00:00Z"
  local ld="-s -w" kv
  for kv in $x; do
    ld+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  (cd "$HERE/gomod" && $NICE "$GO" build -trimpath -ldflags="$ld" -o "$1/" k8s.io/kubernetes/cmd/kubeadm)
}

build_etcd() {
  (cd "$HERE/gomod" && $NICE "$GO" build -trimpath \
    -ldflags="-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3)
}

# Modules without replace directives: `go install pkg@version` in a throwaway GOPATH/bin.
go_install() {
  local out=$1 pkg=$2
  GOBIN="$out" $NICE "$GO" install -trimpath -ldflags="-s -w" "$pkg"
}
build_coredns() { go_install "$1" "github.com/coredns/coredns@$COREDNS_VERSION"; }
build_local_path() { go_install "$1" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"; }
build_helm() { go_install "$1" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"; }
build_kind() { go_install "$1" "sigs.k8s.io/kind@$KIND_VERSION"; }
# crictl on kind nodes: `kind load` asks it whether a node already has an image.
build_crictl() { go_install "$1" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"; }
# kube-router, run on kind with only its firewall (NetworkPolicy) controller: it enforces policies with
# iptables and ipset, which this kernel has, where kindnetd's engine needs nftables `queue`, which it lacks.
build_kube_router() { go_install "$1" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"; }

# cert-manager's controllers: its controller binary is a nested module the Go module proxy does not serve, so
# e2e/certmanager/main.go wires the controllers of the root module (which it serves); the CRDs are copied from
# that module's deploy/crds. The cache is keyed by the version and by the wiring's sources.
build_cert_manager() {
  grep -q "github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION" "$HERE/certmanager/go.mod" \
    || { log "cert-manager: e2e/certmanager/go.mod does not require $CERT_MANAGER_VERSION"; return 1; }
  (cd "$HERE/certmanager" && $NICE "$GO" build -trimpath -ldflags="-s -w" -o "$1/cert-manager-controller" .)
  local mod
  mod=$(cd "$HERE/certmanager" && "$GO" list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
  mkdir -p "$1/../crds"
  cp "$mod"/deploy/crds/cert-manager.io_*.yaml "$1/../crds/"
}
cert_manager_key() {
  cat "$HERE/certmanager/go.mod" "$HERE/certmanager/go.sum" "$HERE/certmanager/main.go" | sha256sum | cut -c1-12
}

# kindnetd, kind's default CNI, is a nested module of the kind repository (images/kindnetd) that the Go
# module proxy does not serve, so its four source files come from a git clone of kind named by KIND_SRC,
# at tag KINDNETD_REF. Its dependencies (kube-network-policies, netlink, client-go) come from the proxy.
build_kindnetd() {
  local src=${KIND_SRC:-} work="$1/../src"
  [[ -n $src && -d $src ]] || { log "kindnetd: set KIND_SRC to a git clone of kubernetes-sigs/kind"; return 1; }
  mkdir -p "$work"
  git -C "$src" archive "$KINDNETD_REF" images/kindnetd | tar -x -C "$work"
  (cd "$work/images/kindnetd" && GOFLAGS="$GOFLAGS -mod=mod" $NICE "$GO" build -trimpath     -ldflags="-s -w" -o "$1/kindnetd" ./cmd/kindnetd)
}

# The sandbox ("pause") container: a tiny static C program we write ourselves (e2e/pause/pause.c).
build_pause() {
  command -v gcc >/dev/null || { log "pause: gcc missing"; return 1; }
  $NICE gcc -Os -Wall -Werror -static -o "$1/pause" "$HERE/pause/pause.c"
  strip "$1/pause"
}

one() {
  case $1 in
    kubernetes) cached kubernetes "$CACHE/kubernetes-$K8S_VERSION" build_kubernetes ;;
    etcd) cached etcd "$CACHE/etcd-$ETCD_VERSION" build_etcd ;;
    coredns) cached coredns "$CACHE/coredns-$COREDNS_VERSION" build_coredns ;;
    local-path) cached local-path "$CACHE/local-path-provisioner-$LOCAL_PATH_VERSION" build_local_path ;;
    helm) cached helm "$CACHE/helm-$HELM_VERSION" build_helm ;;
    pause) cached pause "$CACHE/pause-$PAUSE_VERSION" build_pause ;;
    kubeadm) cached kubeadm "$CACHE/kubeadm-$K8S_VERSION" build_kubeadm ;;
    kind) cached kind "$CACHE/kind-$KIND_VERSION" build_kind ;;
    crictl) cached crictl "$CACHE/crictl-$CRICTL_VERSION" build_crictl ;;
    kindnetd) cached kindnetd "$CACHE/kindnetd-$KINDNETD_REF" build_kindnetd ;;
    kube-router) cached kube-router "$CACHE/kube-router-$KUBE_ROUTER_VERSION" build_kube_router ;;
    cert-manager) cached cert-manager "$CACHE/cert-manager-$CERT_MANAGER_VERSION-$(cert_manager_key)" build_cert_manager ;;
    control-plane) one etcd; one kubernetes ;;
    node | all) one etcd; one kubernetes; one pause; one coredns; one local-path; [[ $1 == all ]] && one helm; true ;;
    *) log "unknown component $1"; return 2 ;;
  esac
}

[[ $# -gt 0 ]] || set -- node
t0=$SECONDS
for c in "$@"; do one "$c"; done
log "total $((SECONDS - t0))s"
