#!/usr/bin/env bash
# Tools the HA fault tests (tests/ha/test_ha_faults.py) need to build network namespaces, veth pairs
# and a bridge, and to cut links: iproute2 (ip) and iptables. Idempotent: installs only what is
# missing, and only as root on Debian/Ubuntu; elsewhere it says what is missing and the tests skip.
set -euo pipefail

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ha-netns-deps: missing ${missing[*]} (needs root and apt-get to install); HA fault tests will skip" >&2
    exit 0
fi
echo "ha-netns-deps: installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
