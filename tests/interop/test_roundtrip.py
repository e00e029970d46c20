"""Real clients, unchanged: every client produces, every client consumes, through our NameServer + broker.

Clients: PyPI rocketmq 0.4.4 (C++ 1.x core), rocketmq-python-cvs 2.1.0.3 (C++ 2.x core), npm
ali-ons 3.12.0 (pure JS) and our own Python SDK. Each one sends COUNT messages (unicode body, a tag,
a key, user properties) to its own topic; then one push consumer per client subscribes to all four
topics at once. So the diagonal of the producer x consumer matrix is each client's own round trip
and the rest is cross-client. The consumers start after the sends: a new group on a young queue is
answered offset 0 by QUERY_CONSUMER_OFFSET (as Java's broker does), so even the C++ clients, which
start new groups at the max offset, see everything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client import BlockingAdmin
from tests.interop.interop_harness import (
    CONSUMER_EXIT,
    PEER_ORIGINS,
    PeerProc,
    Record,
    SdkConsumer,
    ServerPair,
    check_intact,
    home_for,
    run_all,
    sdk_produce,
)

pytestmark = pytest.mark.peers

COUNT = 5
CLIENTS = [*PEER_ORIGINS, "sdk"]
#: Producers whose send result's msg_id is the UNIQ_KEY they set (ali-ons sets none: its msg_id is
#: the broker's offset id, and the broker creates the UNIQ_KEY).
SETS_UNIQ_KEY = {"rocketmq-0.4.4", "rocketmq-python-cvs-2.1.0.3", "sdk"}


def origin(client: str) -> str:
    return PEER_ORIGINS.get(client, "sdk")


def topic_of(client: str) -> str:
    return f"IopMatrix-{origin(client)}"


@dataclass
class Matrix:
    sent_ids: dict[str, list[str]]  # producer -> msg_id per seq
    producers: dict[str, PeerProc]
    consumers: dict[str, PeerProc]
    received: dict[str, list[Record]]  # consumer -> deliveries


@pytest.fixture(scope="module")
def matrix(peers_available: None, servers: ServerPair, work_dir: Path) -> Matrix:
    servers.create_topics(topic_of(c) for c in CLIENTS)
    addr = servers.namesrv_addr
    producers = {
        name: PeerProc(
            name,
            ["produce", "--namesrv", addr, "--group", f"PID-iop-{o}", "--origin", o,
             "--send", f"sync:{topic_of(name)}", "--count", str(COUNT)],
            home_for(work_dir, f"matrix-produce-{o}"),
            timeout=60,
        ).start()
        for name, o in PEER_ORIGINS.items()
    }  # fmt: skip
    sdk_results = sdk_produce(addr, [("sync", topic_of("sdk"))], COUNT)
    for proc in producers.values():
        proc.wait()
    sent_ids = {name: [e.get("msg_id", "") for e in proc.of("sent")] for name, proc in producers.items()}
    sent_ids["sdk"] = [r.msg_id for r in sdk_results]

    topics = [topic_of(c) for c in CLIENTS]
    expect = COUNT * len(CLIENTS)
    consumers = {
        name: PeerProc(
            name,
            ["consume", "--namesrv", addr, "--group", f"CID-iopm-{o}", "--expect", str(expect), "--timeout", "60",
             *[arg for t in topics for arg in ("--topic", t)], *CONSUMER_EXIT[name]],
            home_for(work_dir, f"matrix-consume-{o}"),
            timeout=75,
        )
        for name, o in PEER_ORIGINS.items()
    }  # fmt: skip
    sdk = SdkConsumer(addr, "CID-iopm-sdk", topics, expect).start()
    run_all(list(consumers.values()))
    sdk.wait(60)
    received = {name: proc.records() for name, proc in consumers.items()}
    received["sdk"] = sdk.records
    return Matrix(sent_ids, producers, consumers, received)


@pytest.mark.parametrize("client", list(PEER_ORIGINS))
def test_peer_sends_all_messages(matrix: Matrix, client: str) -> None:
    proc = matrix.producers[client]
    assert proc.returncode == 0, proc.describe()
    sent = proc.of("sent")
    assert [e["seq"] for e in sent] == list(range(COUNT)), proc.describe()
    assert all(e["status"] in (0, "SEND_OK") and e["msg_id"] for e in sent), sent


@pytest.mark.parametrize("client", list(PEER_ORIGINS))
def test_peer_consumer_finishes(matrix: Matrix, client: str) -> None:
    proc = matrix.consumers[client]
    done = proc.of("done")
    assert proc.returncode == 0 and done and done[0]["reached"], proc.describe()


@pytest.mark.parametrize("consumer", CLIENTS, ids=origin)
@pytest.mark.parametrize("producer", CLIENTS, ids=origin)
def test_messages_arrive_intact(matrix: Matrix, producer: str, consumer: str) -> None:
    got = [r for r in matrix.received[consumer] if r.topic == topic_of(producer)]
    where = matrix.consumers[consumer].describe() if consumer in matrix.consumers else "our SDK"
    assert sorted(r.seq for r in got) == list(range(COUNT)), f"deliveries {[r.seq for r in got]} from {where}"
    for record in got:
        assert record.origin == origin(producer)
        check_intact(record, origin(producer))
    if producer in SETS_UNIQ_KEY:
        # The id the producer was given is the one every consumer sees.
        assert [r.props["UNIQ_KEY"] for r in sorted(got, key=lambda r: r.seq)] == matrix.sent_ids[producer]


def test_broker_created_uniq_keys_are_stored_once(matrix: Matrix) -> None:
    """ali-ons sends no UNIQ_KEY: the broker makes one per message, stored, so all consumers agree."""
    seen = {
        consumer: {r.seq: r.props["UNIQ_KEY"] for r in records if r.topic == topic_of("ali-ons-3.12.0")}
        for consumer, records in matrix.received.items()
    }
    first = seen["sdk"]
    assert len(set(first.values())) == COUNT
    assert all(keys == first for keys in seen.values()), seen


@pytest.mark.parametrize("consumer", CLIENTS, ids=origin)
def test_consumed_offsets_are_committed(matrix: Matrix, servers: ServerPair, consumer: str) -> None:
    """Each client's offset commits (UPDATE_CONSUMER_OFFSET, or commitOffset riding on a pull) reach
    the broker: after consuming everything, the group's lag is 0 on every queue of every topic."""
    group = f"CID-iopm-{origin(consumer)}"
    lagging = {}
    deadline = time.monotonic() + 15  # C++ commits from its 5 s persist timer or the next pull
    with BlockingAdmin(servers.namesrv_addr) as admin:
        while True:
            lagging = {
                (p.mq.topic, p.mq.queue_id): (p.consumer_offset, p.broker_offset)
                for c in CLIENTS
                for p in admin.consumer_progress(group, topic_of(c))
                if p.lag
            }
            if not lagging or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert not lagging, f"{group}: (committed, max) per queue with lag: {lagging}"
