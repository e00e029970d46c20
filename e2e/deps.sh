#!/usr/bin/env bash
# Install the Debian packages the Kubernetes harness and the image build need (idempotent).
#   e2e/deps.sh [node|images|all]   (default: all)
# Runs `apt-get update` once, and only when something is missing.
set -euo pipefail
want=${1:-all}
pkgs=(iptables iproute2 kmod)
case $want in
  node) pkgs+=(containerd runc containernetworking-plugins conntrack socat busybox-static) ;;
  images) pkgs+=(docker.io debootstrap containerd runc) ;;
  all) pkgs+=(containerd runc containernetworking-plugins conntrack socat busybox-static docker.io debootstrap) ;;
esac
pkgs+=(gcc libc6-dev openssl)
missing=()
for p in "${pkgs[@]}"; do
  # grep reads to the end: a `grep -q` could leave dpkg-query to die of SIGPIPE, false under pipefail
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}" >&2
  SUDO=; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  # policy-rc.d keeps Debian's maintainer scripts from starting daemons: the harness starts its own.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d; trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
