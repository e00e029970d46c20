"""Apache RocketMQ's Java push consumer (5.3.3, unchanged) consuming by POP from our broker.

`mqadmin setConsumeMode -m POP` switches the group; a DefaultMQPushConsumer with `setClientRebalance(false)`
asks the broker for its queues (QUERY_ASSIGNMENT), is told POP, and then pops, acks and nacks (change
invisible time) instead of pulling. It must get every message exactly as our producer sent it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.interop_harness import ServerPair, home_for, sdk_produce
from tests.interop.java_harness import JavaProc, check_intact, ensure_java, java, java_server_pair

pytestmark = pytest.mark.peers

COUNT = 40
MQADMIN = Path(sys.executable).parent / "mqadmin"


@pytest.fixture(scope="module")
def java_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    yield from java_server_pair(tmp_path_factory.mktemp("java-pop"))


def mqadmin_ok(servers: ServerPair, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env["NAMESRV_ADDR"] = servers.namesrv_addr
    done = subprocess.run([str(MQADMIN), *args], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, f"mqadmin {' '.join(args)} failed:\n{done.stderr}{done.stdout}"
    return done.stdout


def test_java_push_consumer_consumes_by_pop(java_servers: ServerPair) -> None:
    topic, group = "JavaPop", "CID-java-pop"
    java_servers.create_topics([topic])
    mqadmin_ok(java_servers, "updateSubGroup", "-g", group, "-b", java_servers.broker_addr)
    out = mqadmin_ok(
        java_servers, "setConsumeMode", "-b", java_servers.broker_addr, "-t", topic, "-g", group, "-m", "POP"
    )
    assert "success" in out
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run: JavaProc = java(
        ["consume", "--namesrv", java_servers.namesrv_addr, "--group", group, "--topic", topic,
         "--server-rebalance", "--expect", str(COUNT), "--timeout", "60", "--linger", "2"],
        home_for(java_servers.root, "java-pop"), timeout=90,
    )  # fmt: skip
    run.start().wait()
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert Counter(r.seq for r in got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "sdk")
    broker_log = next(p for p in java_servers.logs if p.name == "mqbroker.log").read_text(errors="replace")
    assert f"group {group} pops topic {topic}" in broker_log, "the consumer never sent POP_MESSAGE"


def test_java_pop_consumer_gets_failed_messages_again(java_servers: ServerPair) -> None:
    """RECONSUME_LATER: the Java POP consumer changes the message's invisible time (popDelayLevel, 10 s first);
    the broker revives it through %RETRY%<group>_<topic> with reconsumeTimes 1."""
    topic, group, count = "JavaPopNack", "CID-java-pop-nack", 6
    java_servers.create_topics([topic])
    mqadmin_ok(java_servers, "updateSubGroup", "-g", group, "-b", java_servers.broker_addr)
    mqadmin_ok(java_servers, "setConsumeMode", "-b", java_servers.broker_addr, "-t", topic, "-g", group, "-m", "POP")
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], count, origin="sdk")
    run: JavaProc = java(
        ["consume", "--namesrv", java_servers.namesrv_addr, "--group", group, "--topic", topic,
         "--server-rebalance", "--fail-all", "--expect", str(2 * count), "--timeout", "75", "--linger", "0"],
        home_for(java_servers.root, "java-pop-nack"), timeout=100,
    )  # fmt: skip
    run.start().wait()
    assert run.returncode == 0, run.describe()
    got = run.records()
    again = {r.seq for r in got if r.reconsume_times >= 1}
    assert again == set(range(count)), run.describe()
    first_ids = {r.seq: r.id for r in got if r.reconsume_times == 0}
    for record in got:
        # a redelivery is the same message (same id, body and properties), counted once more
        check_intact(dataclasses.replace(record, reconsume_times=0), "sdk")
        assert record.id == first_ids[record.seq], record
        if record.reconsume_times:
            assert record.props["POP_CK"].split(" ")[4] == "1", record  # read from the pop-retry topic
