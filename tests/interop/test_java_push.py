"""Apache RocketMQ's Java push consumer (5.3.3, unchanged) against our NameServer and broker.

The first test is issue 21's: with default settings the Java client bumps its subscription's
subVersion after each rebalance and heartbeats again; a broker that kept the first subscription
answered every pull SUBSCRIPTION_NOT_LATEST, and the consumer received nothing, ever. The rest cover
the push consumer's features: orderly, tag and SQL92 selectors, two instances of one group
(clustering: each message once overall) and broadcasting (each instance gets everything).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from interop_harness import Record, ServerPair, check_intact, home_for, sdk_produce
from java_harness import JavaProc, client_log_lines, ensure_java, java, java_server_pair

pytestmark = pytest.mark.peers

COUNT = 20


@pytest.fixture(scope="module")
def java_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    yield from java_server_pair(tmp_path_factory.mktemp("java-push"))


def consume(servers: ServerPair, name: str, *args: str, timeout: float = 60.0) -> JavaProc:
    """One `Interop consume` run to its end; the JVM's home is named after the test's group."""
    proc = java(["consume", "--namesrv", servers.namesrv_addr, "--group", f"CID-{name}", *args],
                home_for(servers.root, name), timeout=timeout)  # fmt: skip
    proc.start().wait()
    return proc


def seqs(records: list[Record]) -> Counter[int]:
    return Counter(r.seq for r in records)


def test_java_push_consumer_gets_what_our_producer_sent(java_servers: ServerPair) -> None:
    """Issue 21: CONSUME_FROM_FIRST_OFFSET, clustering, concurrently; all N messages, exactly once."""
    topic = "JavaPushRepro"
    java_servers.create_topics([topic])
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run = consume(java_servers, "java-repro", "--topic", topic, "--expect", str(COUNT), "--timeout", "30")
    got = run.records()
    not_latest = [line for line in client_log_lines(run.home) if "subscription is not latest" in line]
    assert run.returncode == 0, f"{len(got)} of {COUNT} consumed; {not_latest[-2:]}\n{run.describe()}"
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "sdk")
    assert not not_latest, not_latest[-3:]
