"""The fault tests' network lab cleans up after a test process that died before its teardown: a stale
root veth kept its /24 route and made a new lab on the same subnet unreachable (a CI failure)."""

from __future__ import annotations

import os

import pytest

from tests.ha.netns_harness import LAB_PREFIX, NetLab, _sh, free_subnet, sweep_stale_labs


def _dead_pid() -> int:
    for pid in range(32000, 1000, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    raise AssertionError("no free pid found")


@pytest.mark.skipif(NetLab.available() is not None, reason="needs root with ip (network namespaces)")
def test_a_dead_labs_namespaces_and_route_are_swept_and_its_subnet_avoided() -> None:
    stale = f"{LAB_PREFIX}{_dead_pid()}"
    subnet = free_subnet()
    try:
        _sh("ip", "netns", "add", f"{stale}hub")
        _sh("ip", "link", "add", f"{stale}r", "type", "veth", "peer", "name", f"{stale}rh")
        _sh("ip", "addr", "add", f"{subnet}.1/24", "dev", f"{stale}r")
        _sh("ip", "link", "set", f"{stale}r", "up")
        assert free_subnet() != subnet  # taken while the stale veth holds it

        sweep_stale_labs()

        assert f"{stale}hub" not in _sh("ip", "netns", "list").stdout
        assert f"{stale}r" not in _sh("ip", "-br", "link").stdout
        assert free_subnet() == subnet
    finally:
        _sh("ip", "netns", "del", f"{stale}hub", check=False)
        _sh("ip", "link", "del", f"{stale}r", check=False)


@pytest.mark.skipif(NetLab.available() is not None, reason="needs root with ip (network namespaces)")
def test_a_live_labs_namespaces_are_kept() -> None:
    live = f"{LAB_PREFIX}{os.getpid()}"
    try:
        _sh("ip", "netns", "add", f"{live}x")
        sweep_stale_labs()
        assert f"{live}x" in _sh("ip", "netns", "list").stdout
    finally:
        _sh("ip", "netns", "del", f"{live}x", check=False)
