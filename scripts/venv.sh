#!/usr/bin/env bash
# Creates the project's virtualenv (usage: venv.sh PYTHON DIR). Idempotent: a no-op when DIR has a python.
#
# The Makefile passes Debian's /usr/bin/python3.11 when there is one: the interpreter the broker image runs
# (images/broker), and a faster one than a default pyenv build, whose interpreter calls into a shared
# libpython (position-independent code, calls through the PLT) where Debian's links it in statically:
# the store's put path took 9-13% less time on it here, bench.hostspeed's loop ~10-15% (docs/benchmarks.md,
# "Session 10"). Debian ships `venv`'s pip bootstrap separately (python3.11-venv); it is installed here
# when missing, as root with apt-get.
set -euo pipefail

python=$1
dir=$2

if [ -x "$dir/bin/python" ]; then
    exit 0
fi
if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "venv: installing python$version-venv (the pip bootstrap $python lacks)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "python$version-venv"
    else
        echo "venv: $python has no ensurepip; install python$version-venv, or run make PYTHON=<another python3.11>" >&2
        exit 1
    fi
fi
"$python" -m venv "$dir"
