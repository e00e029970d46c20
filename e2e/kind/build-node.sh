#!/usr/bin/env bash
# Build (or reuse) the kind node image, with no registry and no network in any build step.
#   e2e/kind/build-node.sh          prints the node image name on stdout (progress on stderr)
#   e2e/kind/build-node.sh cached   exits 0 when that image is cached (nothing would be built)
#
# What goes in, all built or cached by e2e/build.sh and images/build.sh:
#   - the node: a debootstrap of Debian bookworm with systemd, containerd, runc, the CNI plugins and
#     iptables (images/build.sh base), plus e2e/kind/node/ and kubeadm, kubelet, kubectl, crictl;
#   - preloaded into the node's containerd: kube-apiserver, kube-controller-manager, kube-scheduler,
#     kube-proxy, etcd and CoreDNS under the repository `rocketcluster.local` (kubeadm is told so by
#     e2e/kind/cluster.sh's config), and kindnetd, kube-router (NetworkPolicies), local-path-provisioner,
#     pause and volume-helper.
# The image is named rocketcluster.local/kind-node:<k8s version>-<hash of its inputs>; a `docker save`
# of it is cached under ~/.cache/rocketcluster/kind-node-<tag>/ so that a new Docker engine only loads it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E=$(cd "$HERE/.." && pwd)
REPO=$(cd "$E2E/.." && pwd)
# shellcheck source=/dev/null
. "$E2E/versions.env"
CACHE=${ROCKETCLUSTER_CACHE:-$HOME/.cache/rocketcluster}
DOCKER=/usr/bin/docker
WORK=${KIND_STATE:-/var/lib/rocketcluster/kind}/build
NICE="nice -n 19"
NODE_PACKAGES="systemd systemd-sysv dbus containerd runc containernetworking-plugins iptables nftables ipset conntrack
  iproute2 ethtool util-linux mount kmod libseccomp2 bash ca-certificates procps socat"
# kube-proxy (iptables mode) and kindnetd (masquerade rules) call the iptables commands; kube-router's
# policy controller calls iptables and ipset.
NETWORK_PACKAGES="iptables conntrack ipset"
log() { printf '[kind-node %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

bin() { echo "$CACHE/$1/bin"; }
KBIN=$(bin "kubernetes-$K8S_VERSION")

inputs_hash() { # everything that changes the image (only the versions it uses: another component's
  # version in versions.env must not make the cached image look stale)
  {
    local v
    for v in K8S_VERSION ETCD_VERSION COREDNS_VERSION LOCAL_PATH_VERSION PAUSE_VERSION KINDNETD_REF CRICTL_VERSION \
      KUBE_ROUTER_VERSION; do echo "$v=${!v}"; done
    cat "$0"
    (cd "$HERE/node" && find . -type f | sort | xargs sha256sum)
    echo "$NODE_PACKAGES $NETWORK_PACKAGES"
  } | sha256sum | cut -c1-12
}

# image_from_bins NAME:TAG BASE ENTRYPOINT_JSON FILE=PATH...: a one-layer image on BASE with the given files.
image_from_files() {
  local ref=$1 base=$2 entry=$3 ctx spec
  shift 3
  ctx=$WORK/ctx-$(echo "$ref" | tr '/:' '__')
  rm -rf "$ctx"; mkdir -p "$ctx/root"
  {
    echo "FROM $base"
    echo "COPY root/ /"
    echo 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    [[ -n $entry ]] && echo "ENTRYPOINT $entry"
  } >"$ctx/Dockerfile"
  for spec in "$@"; do
    mkdir -p "$ctx/root$(dirname "${spec#*=}")"
    cp "${spec%%=*}" "$ctx/root${spec#*=}"
  done
  DOCKER_BUILDKIT=0 $NICE $DOCKER build -q --network=none -t "$ref" "$ctx" >/dev/null ||
    die "docker build of $ref failed"
  rm -rf "$ctx"
}

component_images() { # builds them in the engine; prints their names
  local net
  net=$(bash "$REPO/images/build.sh" base $NETWORK_PACKAGES)
  local r=rocketcluster.local
  image_from_files "$r/kube-apiserver:$K8S_VERSION" scratch '' "$KBIN/kube-apiserver=/usr/local/bin/kube-apiserver"
  image_from_files "$r/kube-controller-manager:$K8S_VERSION" scratch '' \
    "$KBIN/kube-controller-manager=/usr/local/bin/kube-controller-manager"
  image_from_files "$r/kube-scheduler:$K8S_VERSION" scratch '' "$KBIN/kube-scheduler=/usr/local/bin/kube-scheduler"
  image_from_files "$r/kube-proxy:$K8S_VERSION" "$net" '' "$KBIN/kube-proxy=/usr/local/bin/kube-proxy"
  # kubeadm names etcd images <version>-<revision>; the -0 revision is ours.
  image_from_files "$r/etcd:${ETCD_VERSION#v}-0" scratch '' "$(bin "etcd-$ETCD_VERSION")/etcd=/usr/local/bin/etcd"
  image_from_files "$r/coredns:$COREDNS_VERSION" scratch '["/coredns"]' "$(bin "coredns-$COREDNS_VERSION")/coredns=/coredns"
  image_from_files "$r/kindnetd:$KINDNETD_REF" "$net" '["/bin/kindnetd"]' "$(bin "kindnetd-$KINDNETD_REF")/kindnetd=/bin/kindnetd"
  image_from_files "$r/kube-router:$KUBE_ROUTER_VERSION" "$net" '["/usr/local/bin/kube-router"]' \
    "$(bin "kube-router-$KUBE_ROUTER_VERSION")/kube-router=/usr/local/bin/kube-router"
  image_from_files "$r/local-path-provisioner:$LOCAL_PATH_VERSION" scratch '["/local-path-provisioner"]' \
    "$(bin "local-path-provisioner-$LOCAL_PATH_VERSION")/local-path-provisioner=/local-path-provisioner"
  echo "$r/kube-apiserver:$K8S_VERSION $r/kube-controller-manager:$K8S_VERSION $r/kube-scheduler:$K8S_VERSION"
  echo "$r/kube-proxy:$K8S_VERSION $r/etcd:${ETCD_VERSION#v}-0 $r/coredns:$COREDNS_VERSION"
  echo "$r/kindnetd:$KINDNETD_REF $r/kube-router:$KUBE_ROUTER_VERSION $r/local-path-provisioner:$LOCAL_PATH_VERSION"
}

build_node() { # NAME
  local name=$1 base ctx=$WORK/node preload=$WORK/preload images
  bash "$E2E/build.sh" kubernetes kubeadm etcd coredns local-path pause kindnetd crictl kube-router >&2
  base=$(bash "$REPO/images/build.sh" base $NODE_PACKAGES)
  log "component images"
  images=$(component_images | tr '\n' ' ')
  rm -rf "$preload"; mkdir -p "$preload"
  # shellcheck disable=SC2086
  $DOCKER save $images >"$preload/components.tar"
  python3 "$E2E/mkimage.py" --tag "rocketcluster.local/pause:$PAUSE_VERSION" --entrypoint /pause \
    --user 65535:65535 "$(bin "pause-$PAUSE_VERSION")/pause=/pause" >"$preload/pause.tar"
  python3 "$E2E/mkimage.py" --tag rocketcluster.local/volume-helper:1 /bin/busybox=/bin/busybox \
    @symlink:busybox=/bin/sh @symlink:busybox=/bin/mkdir @symlink:busybox=/bin/rm @symlink:busybox=/bin/chmod \
    @symlink:busybox=/bin/ls @symlink:busybox=/bin/cat @symlink:busybox=/bin/sleep >"$preload/volume-helper.tar"

  log "node image (FROM $base)"
  rm -rf "$ctx"; mkdir -p "$ctx/bin"
  cp -a "$HERE/node/." "$ctx/"
  cp "$KBIN/kubelet" "$KBIN/kubectl" "$(bin "kubeadm-$K8S_VERSION")/kubeadm" "$(bin "crictl-$CRICTL_VERSION")/crictl" \
    "$ctx/bin/"
  echo "$K8S_VERSION" >"$ctx/kind/version"
  sed -i -e "s/KINDNETD_REF/$KINDNETD_REF/" -e "s/KUBE_ROUTER_VERSION/$KUBE_ROUTER_VERSION/" \
    "$ctx/kind/manifests/default-cni.yaml"
  sed -i -e "s/LOCAL_PATH_VERSION/$LOCAL_PATH_VERSION/" "$ctx/kind/manifests/default-storage.yaml"
  DOCKER_BUILDKIT=0 $NICE $DOCKER build -q --network=none --build-arg "BASE=$base" -t "$name-stage" "$ctx" \
    >/dev/null || die "docker build of the node image failed"

  # Preload: a containerd in a throwaway node container imports the archives into its content store,
  # unpacked later on demand (the build container's overlay root cannot hold overlay snapshots).
  log "preloading $(echo "$images" | wc -w) + 2 images into the node's containerd"
  local cid
  cid=$($DOCKER run -d --privileged --network=none -v "$preload:/preload:ro" --entrypoint /bin/sh "$name-stage" -c '
      containerd >/tmp/containerd.log 2>&1 & pid=$!
      for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
      for a in /preload/*.tar; do
        ctr --namespace=k8s.io images import --no-unpack --all-platforms --digests "$a" >/dev/null || exit 1
      done
      ctr --namespace=k8s.io images ls -q | grep -v -e ^sha256: -e ^import-
      kill $pid; wait $pid; rm -f /tmp/containerd.log')
  if [[ $($DOCKER wait "$cid") != 0 ]]; then
    $DOCKER logs "$cid" >&2; $DOCKER rm -f "$cid" >/dev/null; die "preload failed"
  fi
  $DOCKER logs "$cid" | sed 's/^/  preloaded: /' >&2
  $DOCKER commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
    "$cid" "$name" >/dev/null
  $DOCKER rm -f "$cid" >/dev/null
  $DOCKER rmi "$name-stage" >/dev/null
  rm -rf "$ctx" "$preload"
}

main() {
  local tag name dir t0=$SECONDS
  tag=$K8S_VERSION-$(inputs_hash)
  name=rocketcluster.local/kind-node:$tag
  dir=$CACHE/kind-node-$tag
  if [[ ${1:-} == cached ]]; then [[ -f $dir/.complete ]]; return; fi
  bash "$REPO/images/build.sh" docker-up
  if $DOCKER image inspect "$name" >/dev/null 2>&1; then
    log "$name: in the Docker engine"
  elif [[ -f $dir/.complete ]]; then
    log "$name: loading $dir/image.tar"
    $DOCKER load -i "$dir/image.tar" >/dev/null
  else
    mkdir -p "$WORK"
    build_node "$name"
    rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
    $DOCKER save "$name" >"$dir.tmp/image.tar"
    echo "built $(date -u +%FT%TZ) in $((SECONDS - t0))s" >"$dir.tmp/.complete"
    rm -rf "$dir"; mv "$dir.tmp" "$dir"
    log "$name: built in $((SECONDS - t0))s, $(($($DOCKER image inspect -f '{{.Size}}' "$name") / 1000000)) MB"
    # Older node images are 1.1 GB each: drop their caches, and their Docker images unless a node runs them.
    local old
    for old in "$CACHE"/kind-node-*; do
      [[ $old == "$dir" || ! -d $old ]] || rm -rf "$old"
    done
    for old in $($DOCKER images --format '{{.Repository}}:{{.Tag}}' rocketcluster.local/kind-node); do
      [[ $old == "$name" ]] || $DOCKER rmi "$old" >/dev/null 2>&1 || true
    done
  fi
  echo "$name"
}
main "$@"
