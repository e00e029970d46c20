"""Fixtures of the interop tests: one real NameServer + broker subprocess pair for the session.

The pair runs the installed console scripts (`mqnamesrv -c`, `mqbroker -c`) on free loopback ports
with a tmp store, as a user would; every test uses its own topics and groups, so they share it.
Helpers (peer processes, our SDK roles, the message fields) live in interop_harness.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.interop_harness import ServerPair


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    pair = ServerPair(tmp_path_factory.mktemp("interop"))
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


#: broker.conf of `feature_servers`: a check-back within ~2 s of a transaction left unknown (the
#: defaults, 6 s timeout and a 30 s check interval, would make one test wait half a minute), and
#: SQL92 subscriptions allowed (off by default, as in RocketMQ).
FEATURE_BROKER_CONF = {
    "transactionTimeOut": "1000",
    "transactionCheckInterval": "1000",
    "enablePropertyFilter": "true",
}


@pytest.fixture(scope="session")
def feature_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    """A second pair for transactions and SQL92 filtering, started only by the tests that use it."""
    pair = ServerPair(tmp_path_factory.mktemp("interop-features"), extra=FEATURE_BROKER_CONF)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="session")
def work_dir(servers: ServerPair) -> Path:
    """Where peer processes get their HOME directories (next to the servers' logs)."""
    return servers.root


@pytest.fixture(autouse=True)
def _interop_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Our SDK's INFO logs in failure reports: they show its rebalances and send-backs."""
    caplog.set_level(logging.INFO, logger="broker")
