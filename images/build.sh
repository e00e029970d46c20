#!/usr/bin/env bash
# Build container images without any registry.
#
#   images/build.sh [IMAGE_DIR_NAME...]     build images/<name> (default: every dir with a Dockerfile)
#   images/build.sh save IMAGE              write `docker save IMAGE` to stdout (starts the engine)
#   images/build.sh docker-stop             stop the Docker engine this script started
#   images/build.sh docker-up               start the engine if it is not running
#   images/build.sh base PACKAGE...         print the name of the debootstrap base image with PACKAGEs (builds it)
#
# An image dir holds a Dockerfile and image.env:
#   IMAGE=rocketcluster.local/<name>   TAG=<tag>   BASE_PACKAGES="python3 ..."   WHEELS="<pip spec>"
#   BUILD_PACKAGES="..." (optional: what only the build stage needs, e.g. binutils' strip)
# The base is a debootstrap of Debian bookworm (minbase + BASE_PACKAGES), cached under
# ~/.cache/rocketcluster/rootfs-bookworm-<hash>/ and imported into the local Docker engine as
# rocketcluster.local/base:<hash>; the Dockerfile starts `FROM $BASE`, and its build stage may start
# `FROM $BUILD_BASE`, the same with BUILD_PACKAGES added ($BASE when there are none). Python dependencies are built
# as wheels on the host (WHEELS, pip wheel into the build context) and installed offline in the build.
# The build runs with --network=none. The engine is Debian's docker.io, started here if not running,
# with no bridge and no iptables rules.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CACHE=${ROCKETCLUSTER_CACHE:-$HOME/.cache/rocketcluster}
DOCKER=/usr/bin/docker           # Debian's client, matching Debian's engine
DATA=${IMAGES_STATE:-/var/lib/rocketcluster/images}   # logs, build contexts, built.txt (not in .data/: other suites wipe it)
PY=${PYTHON_FOR_WHEELS:-$REPO/.venv/bin/python}
NICE="nice -n 19"
log() { printf '[images %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The engine's default runtime is runc behind e2e/kind/node/usr/local/bin/runc-caps: a privileged
# container (a kind node) asks for every capability, and root here lacks CAP_SYS_RESOURCE, which plain
# runc then fails on. For any other container the wrapper changes nothing. The engine runs a copy under $DATA:
# it outlives the checkout that started it (a CI clone, removed after its run), and every checkout uses it.
RUNC_CAPS=$DATA/runc-caps
docker_up() {
  bash "$REPO/e2e/deps.sh" images
  mkdir -p "$DATA"
  install -m 0755 "$REPO/e2e/kind/node/usr/local/bin/runc-caps" "$RUNC_CAPS.new" && mv -f "$RUNC_CAPS.new" "$RUNC_CAPS"
  if $DOCKER info >/dev/null 2>&1; then
    [[ $($DOCKER info --format '{{.DefaultRuntime}}' 2>/dev/null) == runc-caps &&
      $($DOCKER info --format '{{json .Runtimes}}' 2>/dev/null) == *"\"$RUNC_CAPS\""* ]] && return 0
    # An engine started before the wrapper existed, or with a wrapper elsewhere: restart it, if it is ours and idle.
    [[ -f $DATA/dockerd.pid ]] || { log "the running dockerd is not ours: privileged containers may fail"; return 0; }
    [[ -z $($DOCKER ps -q) ]] || { log "dockerd runs containers: not restarting it for runc-caps"; return 0; }
    log "restarting dockerd with the runc-caps runtime"
    docker_stop
  fi
  mkdir -p "$DATA"
  # A dockerd killed without its shutdown (machine or session stop) leaves its pidfile, and a new
  # dockerd refuses to start while it exists: drop it unless it names a dockerd that still runs.
  if [[ -f $DATA/dockerd.pid ]]; then
    local pid; pid=$(cat "$DATA/dockerd.pid")
    if [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]]; then
      log "removing the stale pidfile of a dockerd that no longer runs (pid $pid)"
      rm -f "$DATA/dockerd.pid"
    fi
  fi
  # No default bridge and no iptables rules: image builds run with --network=none. User-defined
  # bridge networks (kind's) still work: node to node on the bridge, the API server through
  # docker-proxy on 127.0.0.1, and Docker's embedded DNS inside each container.
  log "starting dockerd (no bridge, no iptables)"
  setsid dockerd --iptables=false --ip6tables=false --bridge=none --ip-masq=false \
    --add-runtime "runc-caps=$RUNC_CAPS" --default-runtime runc-caps \
    --pidfile "$DATA/dockerd.pid" >>"$DATA/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 120); do $DOCKER info >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "dockerd did not start, see $DATA/dockerd.log"
}
docker_stop() {
  [[ -f $DATA/dockerd.pid ]] || return 0
  local pid; pid=$(cat "$DATA/dockerd.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  rm -f "$DATA/dockerd.pid"
}

debian_mirror() { # the Debian mirror apt on this machine already uses
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' | awk '{print $2}' | head -1)
  [[ -n $m ]] || die "no Debian mirror configured in /etc/apt"
  echo "$m"
}

base_image() { # PACKAGES... -> prints the base image name, building the rootfs when missing
  local pkgs="$*" key rootfs name
  key=$(echo "bookworm minbase $pkgs v1" | sha256sum | cut -c1-12)
  rootfs=$CACHE/rootfs-bookworm-$key
  name=rocketcluster.local/base:$key
  if ! $DOCKER image inspect "$name" >/dev/null 2>&1; then
    if [[ ! -f $rootfs/.complete ]]; then
      log "debootstrap bookworm (+ $pkgs) -> $rootfs"
      rm -rf "$rootfs.tmp"; mkdir -p "$rootfs.tmp"
      local inc; inc=$(echo "$pkgs" | tr ' ' ',')
      $NICE debootstrap --variant=minbase ${inc:+--include="$inc"} bookworm "$rootfs.tmp" "$(debian_mirror)" \
        >"$rootfs.tmp.log" 2>&1 || die "debootstrap failed, see $rootfs.tmp.log"
      # Slim it: no apt lists or caches, docs, man pages, locales but C.
      rm -rf "$rootfs.tmp"/var/lib/apt/lists/* "$rootfs.tmp"/var/cache/apt/* "$rootfs.tmp"/usr/share/doc/* \
        "$rootfs.tmp"/usr/share/man/* "$rootfs.tmp"/usr/share/info/* "$rootfs.tmp"/var/log/*.log
      find "$rootfs.tmp/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C*' -exec rm -rf {} + 2>/dev/null || true
      find "$rootfs.tmp/usr/lib/python3"* -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
      touch "$rootfs.tmp/.complete"; rm -rf "$rootfs"; mv "$rootfs.tmp" "$rootfs"
    fi
    log "importing $rootfs as $name"
    tar -C "$rootfs" --exclude=./.complete --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
      $DOCKER import - "$name" >/dev/null
  fi
  echo "$name"
}

build_one() {
  local dir=$HERE/$1
  [[ -f $dir/Dockerfile && -f $dir/image.env ]] || die "$dir needs a Dockerfile and image.env"
  local IMAGE TAG BASE_PACKAGES="" BUILD_PACKAGES="" WHEELS=""
  # shellcheck source=/dev/null
  . "$dir/image.env"
  local t0=$SECONDS base build_base ctx=$DATA/context-$1
  # shellcheck disable=SC2086
  base=$(base_image $BASE_PACKAGES)
  # shellcheck disable=SC2086
  build_base=$(if [[ -n $BUILD_PACKAGES ]]; then base_image $BASE_PACKAGES $BUILD_PACKAGES; else echo "$base"; fi)
  rm -rf "$ctx"; mkdir -p "$ctx/wheels"
  cp -a "$dir/." "$ctx/"
  if [[ -n $WHEELS ]]; then
    [[ -x $PY ]] || die "$PY missing: run 'make venv' first"
    log "$1: building wheels on the host ($WHEELS)"
    # The project itself, then its dependencies: all as wheels for this Python (3.11, as in bookworm).
    # shellcheck disable=SC2086
    (cd "$REPO" && $NICE "$PY" -m pip wheel --quiet -w "$ctx/wheels" $WHEELS) || die "pip wheel failed"
  fi
  log "$1: docker build $IMAGE:$TAG (FROM $base, no network)"
  DOCKER_BUILDKIT=0 $NICE $DOCKER build --network=none --build-arg "BASE=$base" --build-arg "BUILD_BASE=$build_base" \
    -t "$IMAGE:$TAG" "$ctx" \
    >"$DATA/build-$1.log" 2>&1 || die "docker build failed, see $DATA/build-$1.log"
  rm -rf "$ctx"
  $DOCKER image prune -f >/dev/null 2>&1 || true   # the dangling build stage
  local size; size=$($DOCKER image inspect -f '{{.Size}}' "$IMAGE:$TAG")
  log "$1: $IMAGE:$TAG built in $((SECONDS - t0))s, $((size / 1000000)) MB"
  { cat "$DATA/built.txt" 2>/dev/null || true; echo "$IMAGE:$TAG"; } | sort -u >"$DATA/built.txt.new"
  mv "$DATA/built.txt.new" "$DATA/built.txt"
}

case ${1:-} in
  save) docker_up; $DOCKER save "$2" ;;
  docker-stop) docker_stop ;;
  docker-up) mkdir -p "$DATA"; docker_up ;;
  base) mkdir -p "$DATA"; docker_up; shift; base_image "$@" ;;
  *)
    mkdir -p "$DATA"
    docker_up
    if [[ $# -eq 0 ]]; then
      for d in "$HERE"/*/; do [[ -f $d/Dockerfile ]] && set -- "$@" "$(basename "$d")"; done
    fi
    for i in "$@"; do build_one "$i"; done
    ;;
esac
