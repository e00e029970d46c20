#!/usr/bin/env bash
# Debian packages the tests need: iproute2 (ip) and iptables for the HA fault tests' network
# namespaces, veth pairs and link cuts; a Java runtime for the Spark tests; Prometheus for the Grafana
# dashboard's queries (tests/operator/test_dashboard.py). Idempotent: installs only
# what is missing, and only as root on Debian/Ubuntu; elsewhere it says what is missing.
set -euo pipefail

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: missing ${missing[*]} (needs root and apt-get to install); the tests that need it will skip" >&2
    exit 0
fi
echo "system-deps: installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
