#!/usr/bin/env bash
# `make run`: a local NameServer and broker pair on 127.0.0.1 with data under .data/, in the foreground until
# Ctrl-C. The supervisor is scripts/run_local.py (readiness, crash reports, a clean Ctrl-C); it runs with the
# venv's interpreter, the one that has the servers installed. RUN_DATA_DIR, RUN_NAMESRV_PORT, RUN_BROKER_PORT
# and RUN_HA_PORT override the data dir and ports (see run_local.py).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/run_local.py "$@"
