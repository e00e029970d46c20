"""Fixtures of the mqadmin tests: one real NameServer + broker subprocess pair for the session, started
exactly as the interop tests start theirs (tests/interop/interop_harness.ServerPair, imported from there
rather than copied), and a runner of the installed `mqadmin` against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.interop.interop_harness import ServerPair

MQADMIN = Path(sys.executable).parent / "mqadmin"
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    servers = ServerPair(tmp_path_factory.mktemp("mqadmin"))
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="session")
def mqadmin(pair: ServerPair) -> Run:
    """`mqadmin(*args)`: the command as a user runs it, NAMESRV_ADDR set to the pair's NameServer."""
    env = {**os.environ, "NAMESRV_ADDR": pair.namesrv_addr}

    def run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(MQADMIN), *args], capture_output=True, text=True, timeout=timeout, env=env)

    return run
