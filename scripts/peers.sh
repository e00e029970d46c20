#!/usr/bin/env bash
# Installs the three real third-party RocketMQ clients the golden and interop tests drive:
#   PyPI rocketmq==0.4.4 (C++ 1.x core), PyPI rocketmq-python-cvs==2.1.0.3 (C++ 2.x core),
#   npm ali-ons@3.12.0 (pure JS).
# Each goes into its own prefix under ~/.cache/rocketcluster/peers/, keyed by version (both Python
# packages install a module named `rocketmq`, so they cannot share a venv). A `.ok` stamp written
# only after an import check makes a second run a fast no-op. Called by `make peers` / `make test`;
# tests/peers/__init__.py finds the clients at the same paths.
set -euo pipefail

PEERS_DIR="${ROCKETCLUSTER_PEERS_DIR:-${HOME}/.cache/rocketcluster/peers}"
PYTHON="${PEERS_PYTHON:-python3}"

ROCKETMQ_VERSION="0.4.4"
CVS_VERSION="2.1.0.3"
ALI_ONS_VERSION="3.12.0"

die() { echo "peers.sh: error: $*" >&2; exit 1; }

mkdir -p "$PEERS_DIR" || die "cannot create $PEERS_DIR"

# install_py NAME PIP_SPEC: a venv at $PEERS_DIR/NAME whose python can import rocketmq.client.
install_py() {
    local name="$1" spec="$2" dir="$PEERS_DIR/$1"
    [[ -f "$dir/.ok" ]] && return 0
    echo "peers.sh: installing $spec into $dir"
    rm -rf "$dir"
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PEERS_PYTHON)"
    "$PYTHON" -m venv "$dir" || die "venv creation failed for $name (is python3-venv installed?)"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$spec" \
        || die "pip install $spec failed (registry unreachable?)"
    # The library logs under $HOME/logs; keep the check from writing into the real HOME.
    local tmp_home
    tmp_home="$(mktemp -d)"
    HOME="$tmp_home" "$dir/bin/python" -c 'from rocketmq.client import Producer, PushConsumer, Message' \
        || { rm -rf "$tmp_home"; die "$spec installed but 'from rocketmq.client import Producer' fails"; }
    rm -rf "$tmp_home"
    touch "$dir/.ok"
}

install_node() {
    local dir="$PEERS_DIR/ali-ons-$ALI_ONS_VERSION"
    [[ -f "$dir/.ok" ]] && return 0
    command -v node >/dev/null || die "node not found; ali-ons needs Node.js (>= 14)"
    command -v npm >/dev/null || die "npm not found; needed to install ali-ons"
    echo "peers.sh: installing ali-ons@$ALI_ONS_VERSION into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "ali-ons@$ALI_ONS_VERSION" >/dev/null \
        || die "npm install ali-ons@$ALI_ONS_VERSION failed (registry unreachable?)"
    (cd "$dir" && node -e "require('ali-ons')") || die "ali-ons installed but require('ali-ons') fails"
    touch "$dir/.ok"
}

install_py "rocketmq-$ROCKETMQ_VERSION" "rocketmq==$ROCKETMQ_VERSION"
install_py "rocketmq-python-cvs-$CVS_VERSION" "rocketmq-python-cvs==$CVS_VERSION"
install_node
echo "peers.sh: peers ready in $PEERS_DIR"
