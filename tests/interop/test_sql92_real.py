"""SQL92 property filtering with a real client: ali-ons subscribes with a SQL92 selector.

ali-ons 3.12.0 accepts `subscribe(topic, {expressionType: 'SQL92', subString}, handler)`
(lib/consumer/mq_push_consumer.js `buildSubscriptionData`) and sends the expression type in its
heartbeat and in PULL_MESSAGE; it filters nothing itself for SQL92 (its client-side filter is for
tags only), so what it receives is exactly what the broker selected. The C++ clients (rocketmq 0.4.4,
rocketmq-python-cvs 2.1.0.3) subscribe with tag expressions only (docs/compatibility.md).

Our SDK produces messages with user properties `a` (a number, missing on one message) and `b`;
ali-ons consumes the topic with `a > 5 AND b = 'x'` on the `feature_servers` broker
(enablePropertyFilter=true) and must get exactly the matching ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client import BlockingAdmin, BlockingProducer
from tests.interop.interop_harness import PEER_ORIGINS, PeerProc, ServerPair, check_intact, home_for, sdk_message

pytestmark = pytest.mark.peers

ALIONS = "ali-ons-3.12.0"
TOPIC = f"IopSql-{PEER_ORIGINS[ALIONS]}"
GROUP = f"CID-iopsql-{PEER_ORIGINS[ALIONS]}"
COUNT = 12
EXPRESSION = "a > 5 AND b = 'x'"
NO_A = 10  # this message has no property `a`: the comparison is NULL, so it must not match


def selector_props(i: int) -> dict[str, str]:
    props = {"b": "x" if i % 2 == 0 else "y"}
    if i != NO_A:
        props["a"] = str(i)
    return props


#: Even i above 5 that has an `a`: 6 and 8.
MATCHING = [i for i in range(COUNT) if i != NO_A and i > 5 and i % 2 == 0]


def test_ali_ons_sql92_subscription_gets_exactly_the_matching_messages(
    peers_available: None, feature_servers: ServerPair, work_dir: Path
) -> None:
    addr = feature_servers.namesrv_addr
    feature_servers.create_topics([TOPIC])
    with BlockingProducer("PID-iopsql-sdk", addr) as producer:
        for i in range(COUNT):
            msg = sdk_message("sdk", TOPIC, i)
            msg.properties.update(selector_props(i))
            producer.send(msg)
    args = ["consume", "--namesrv", addr, "--group", GROUP, "--topic", TOPIC, "--expect", str(len(MATCHING)),
            "--expression", EXPRESSION, "--sql", "--linger", "2", "--timeout", "20"]  # fmt: skip
    proc = PeerProc(ALIONS, args, home_for(work_dir, "sql92-alions"), timeout=35).start().wait()

    done = proc.of("done")
    assert proc.returncode == 0 and done and done[0]["reached"], proc.describe()
    got = proc.records()
    # Exactly the matching messages, each once, even after 2 more seconds of consuming.
    assert sorted(r.seq for r in got) == MATCHING, proc.describe()
    for record in got:
        check_intact(record, "sdk")
        assert record.props["a"] == str(record.seq) and record.props["b"] == "x", record
    # close() committed the group's offsets past every delivered message. (Non-matching messages at
    # the end of a queue are passed only when the client's held pull returns NO_MATCHED_MSG after the
    # long-poll, as with a Java broker, so the offsets are not compared with the queue ends.)
    with BlockingAdmin(addr) as admin:
        committed = {p.mq.queue_id: p.consumer_offset for p in admin.consumer_progress(GROUP, TOPIC)}
    assert all(committed[r.queue_id] > r.queue_offset for r in got), (committed, got)
