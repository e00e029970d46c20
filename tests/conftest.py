"""Shared pytest fixtures. Keep this small: only real-peer fixtures and markers live here.

`peer_run(name)` runs a real third-party client (tests/peers) against a capturing fake
NameServer + broker once per session and returns the cached PeerRun; tests marked
`@pytest.mark.peers` use it. Peers are installed by scripts/peers.sh (`make test` runs it first);
if they are missing we try that script once and skip with its error only if it fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from peers import PEERS, PeerRun, capture, ensure_peers


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
