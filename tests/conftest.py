"""Shared pytest fixtures. Keep this small: only real-peer fixtures and markers live here.

`peer_run(name)` runs a real third-party client (tests/peers) against a capturing fake
NameServer + broker once per session and returns the cached PeerRun; tests marked
`@pytest.mark.peers` use it. Peers are installed by scripts/peers.sh (`make test` runs it first);
if they are missing we try that script once and skip with its error only if it fails.

`async def test_...` functions run on the broker's own loop (uvloop, `broker.transport.loop.run`), a fresh
loop per test, so a test's body is its scenario: no `async def scenario()` + `run(scenario())` wrapper.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import pytest

from broker.transport.loop import run
from tests.peers import PEERS, PeerRun, capture, ensure_peers


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test to completion; other tests fall through to pytest's own call."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    # The test's own parameters only: funcargs also holds autouse fixtures it does not take.
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    run(pyfuncitem.obj(**arguments))
    return True


@pytest.fixture(scope="session")
def peers_available() -> None:
    problem = ensure_peers()
    if problem is not None:
        pytest.skip(f"real RocketMQ client peers cannot be installed here: {problem}")


@pytest.fixture(scope="session")
def peer_run(peers_available: None) -> Callable[[str], PeerRun]:
    runs: dict[str, PeerRun] = {}

    def run(name: str) -> PeerRun:
        if name not in runs:
            runs[name] = asyncio.run(capture(PEERS[name]))
        return runs[name]

    return run
