"""Real clients, unchanged: the send and consume features each client has, against our broker.

- ordered send with a selector: C++ `send_orderly` (arg % queue count), consumed by the C++ orderly
  push consumer (LOCK_BATCH_MQ); ali-ons `shardingKey` (md5 of the key picks the queue);
- one-way send (C++ `send_oneway`) and batch send (C++ `send_batch`, SEND_BATCH_MESSAGE 320);
- automatic topic creation: C++ sends to an unknown topic through TBW102's route;
- consuming retries: the listener fails a message's first delivery, the client sends it back
  (CONSUMER_SEND_MSG_BACK) and the broker redelivers it through %RETRY%<group> with reconsumeTimes 1;
- our SDK's one-way and batch sends consumed by every peer, and the peers' sends consumed by our SDK.

ali-ons 3.12.0 has no one-way or batch send API and cannot auto-create topics (docs/compatibility.md).
All producers run first, concurrently; then all consumers, concurrently.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import pairwise
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
    fields,
    home_for,
    run_all,
    sdk_produce,
)

pytestmark = pytest.mark.peers

COUNT = 6
SHARDS = 3
RETRY_COUNT = 3
QUEUES = 4
CPP = ["rocketmq-0.4.4", "rocketmq-python-cvs-2.1.0.3"]
CPP044 = CPP[0]
#: 0.4.4 zlib-compresses a whole batch body over 4 KiB (fixed upstream by rocketmq-client-cpp PR 186;
#: a Java broker fails on it too). Its regular batch keeps to the four small messages (seq 0-3), and
#: a second batch with the 12 KiB one goes to this topic to show how our broker refuses it.
BIG_BATCH_TOPIC = "IopBigBat-cpp044"
ALIONS = "ali-ons-3.12.0"
RETRY_TOPIC = "IopRetry"
#: The retry consumers subscribe with a tag expression: of seqs 0-2 (tag0, tag1, tag0) only 0 and 2 match.
RETRY_EXPRESSION = "tag0 || tag9"
RETRY_SEQS = [0, 2]
SDK_TOPICS = ["IopOw-sdk", "IopBat-sdk"]
#: The C++ pull consumers read SDK_TOPICS with the expression "tag1": seqs 1, 3, 5 of each.
PULL_SEQS = [1, 3, 5]


def own_topics(peer: str) -> dict[str, str]:
    """mode -> topic that `peer` sends with that mode (auto = sync to a topic nobody created)."""
    o = PEER_ORIGINS[peer]
    if peer == ALIONS:
        return {"sharding": f"IopOrd-{o}", "delay": f"IopDelay-{o}"}
    return {
        "orderly": f"IopOrd-{o}",
        "oneway": f"IopOw-{o}",
        "batch": f"IopBat-{o}",
        "sync": f"IopAuto-{o}",
        "delay": f"IopDelay-{o}",
    }


def sent_count(peer: str, mode: str) -> int:
    return 4 if (peer, mode) == (CPP044, "batch") else COUNT


@dataclass
class Features:
    producers: dict[str, PeerProc]
    consumers: dict[str, PeerProc]
    retriers: dict[str, PeerProc]
    pullers: dict[str, PeerProc]
    sdk: SdkConsumer
    retry_ids: list[str]


def _consume_args(addr: str, group: str, topics: list[str], expect: int, *extra: str) -> list[str]:
    topic_args = [arg for t in topics for arg in ("--topic", t)]
    return ["consume", "--namesrv", addr, "--group", group, "--expect", str(expect), "--timeout", "60", *topic_args,
            *extra]  # fmt: skip


@pytest.fixture(scope="module")
def features(peers_available: None, servers: ServerPair, work_dir: Path) -> Features:
    addr = servers.namesrv_addr
    created = [t for p in PEER_ORIGINS for mode, t in own_topics(p).items() if mode != "sync"]
    servers.create_topics([*created, *SDK_TOPICS, RETRY_TOPIC, BIG_BATCH_TOPIC], queues=QUEUES)

    producers = {}
    for peer, o in PEER_ORIGINS.items():
        sends = [f"{mode}:{t}:{sent_count(peer, mode)}" for mode, t in own_topics(peer).items()]
        if peer == CPP044:
            sends.append(f"batch:{BIG_BATCH_TOPIC}:{COUNT}")
        args = ["produce", "--namesrv", addr, "--group", f"PID-iopf-{o}", "--origin", o, "--count", str(COUNT),
                "--shards", str(SHARDS), *[a for send in sends for a in ("--send", send)]]  # fmt: skip
        producers[peer] = PeerProc(peer, args, home_for(work_dir, f"features-produce-{o}"), timeout=60).start()
    sdk_produce(addr, [("oneway", SDK_TOPICS[0]), ("batch", SDK_TOPICS[1])], COUNT)
    retry_ids = [r.msg_id for r in sdk_produce(addr, [("sync", RETRY_TOPIC)], RETRY_COUNT, origin="sdkretry")]
    for proc in producers.values():
        proc.wait()

    consumers, retriers = {}, {}
    retry_flags = ["--fail-once", "--expression", RETRY_EXPRESSION]
    for peer, o in PEER_ORIGINS.items():
        topics = [*own_topics(peer).values(), *SDK_TOPICS]
        expect = sum(sent_count(peer, mode) for mode in own_topics(peer)) + COUNT * len(SDK_TOPICS)
        flags = [*(["--orderly"] if peer in CPP else []), *CONSUMER_EXIT[peer]]
        consumers[peer] = PeerProc(
            peer,
            _consume_args(addr, f"CID-iopf-{o}", topics, expect, *flags),
            home_for(work_dir, f"features-consume-{o}"),
            timeout=75,
        )
        retriers[peer] = PeerProc(
            peer,
            _consume_args(addr, f"CID-iopr-{o}", [RETRY_TOPIC], len(RETRY_SEQS), *retry_flags),
            home_for(work_dir, f"features-retry-{o}"),
            timeout=75,
        )
    pull_args = ["--expect", str(len(PULL_SEQS) * 2), "--expression", "tag1"]
    pullers = {
        peer: PeerProc(
            peer,
            ["pull", "--namesrv", addr, "--group", f"CID-iopp-{PEER_ORIGINS[peer]}", *pull_args,
             *[a for t in SDK_TOPICS for a in ("--topic", t)]],
            home_for(work_dir, f"features-pull-{PEER_ORIGINS[peer]}"),
            timeout=60,
        )
        for peer in CPP
    }  # fmt: skip
    peer_topics = [t for p in PEER_ORIGINS for t in own_topics(p).values()]
    sdk_expect = sum(sent_count(p, mode) for p in PEER_ORIGINS for mode in own_topics(p))
    sdk = SdkConsumer(addr, "CID-iopf-sdk", peer_topics, sdk_expect).start()
    run_all([*consumers.values(), *retriers.values(), *pullers.values()])
    sdk.wait(60)
    return Features(producers, consumers, retriers, pullers, sdk, retry_ids)


def _records(proc: PeerProc, topic: str) -> list[Record]:
    return [r for r in proc.records() if r.topic == topic]


@pytest.mark.parametrize("peer", list(PEER_ORIGINS))
def test_producer_and_consumer_runs_complete(features: Features, peer: str) -> None:
    producer, consumer = features.producers[peer], features.consumers[peer]
    unexpected = [e for e in producer.of("send_error") if e["topic"] != BIG_BATCH_TOPIC]
    assert producer.returncode == 0 and not producer.of("error") and not unexpected, producer.describe()
    assert all(e.get("status", 0) in (0, "SEND_OK") for e in producer.of("sent")), producer.describe()
    done = consumer.of("done")
    assert consumer.returncode == 0 and done and done[0]["reached"], consumer.describe()


@pytest.mark.parametrize("peer", CPP)
def test_cpp_ordered_send_keeps_each_shard_on_one_queue_in_order(features: Features, peer: str) -> None:
    topic = own_topics(peer)["orderly"]
    proc = features.consumers[peer]
    got = _records(proc, topic)
    assert sorted(r.seq for r in got) == list(range(COUNT)), proc.describe()
    for record in got:
        check_intact(record, PEER_ORIGINS[peer])
    by_shard: dict[int, list[Record]] = {}
    for record in got:  # in delivery order
        by_shard.setdefault(int(record.props["shard"]), []).append(record)
    for shard, records in by_shard.items():
        assert len({r.queue_id for r in records}) == 1, f"shard {shard} spread over queues: {records}"
        # Sent in seq order to one queue: stored in that order, and delivered in that order.
        assert [r.seq for r in records] == sorted(r.seq for r in records), records
        assert all(a.queue_offset < b.queue_offset for a, b in pairwise(records)), records
        # The library's default selector is arg % queue count.
        assert records[0].queue_id == shard % QUEUES


def ali_ons_sharding_queue(key: str) -> int:
    """ali-ons 3.12.0's selector: the first 4 bytes of md5(shardingKey), big-endian, mod queue count."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big") % QUEUES


def test_ali_ons_sharding_key_pins_a_queue(features: Features) -> None:
    """Each shard whose key maps to a queue other than 0 stays on that queue, in send order.

    Keys mapping to queue 0 are not pinned by ali-ons 3.12.0 itself: it reads the chosen queue id
    with `queueIds[i] || ''`, so id 0 counts as "no choice" and round-robin applies (known client
    issue, docs/compatibility.md). Keys "0" and "1" map to queue 0, "2" to queue 1.
    """
    proc = features.consumers[ALIONS]
    got = _records(proc, own_topics(ALIONS)["sharding"])
    assert sorted(r.seq for r in got) == list(range(COUNT)), proc.describe()
    for record in got:
        check_intact(record, PEER_ORIGINS[ALIONS])
    pinned = [s for s in range(SHARDS) if ali_ons_sharding_queue(str(s)) != 0]
    assert pinned, "no shard key maps to a queue other than 0: pick other keys"
    for shard in pinned:
        records = [r for r in got if r.props["shard"] == str(shard)]
        assert records and {r.queue_id for r in records} == {ali_ons_sharding_queue(str(shard))}, records
        assert [r.seq for r in records] == sorted(r.seq for r in records), records


@pytest.mark.parametrize("mode", ["oneway", "batch", "sync"], ids=["oneway", "batch", "auto-created-topic"])
@pytest.mark.parametrize("peer", CPP)
def test_cpp_send_modes_arrive_intact_at_the_peer_and_our_sdk(features: Features, peer: str, mode: str) -> None:
    topic, n = own_topics(peer)[mode], sent_count(peer, mode)
    for where, got in (("peer", _records(features.consumers[peer], topic)),
                       ("sdk", [r for r in features.sdk.records if r.topic == topic])):  # fmt: skip
        assert sorted(r.seq for r in got) == list(range(n)), f"{where}: {[r.seq for r in got]}"
        for record in got:
            check_intact(record, PEER_ORIGINS[peer])
        if mode == "batch":
            # A batch goes to one queue, in order, on consecutive offsets.
            ordered = sorted(got, key=lambda r: r.queue_offset)
            assert len({r.queue_id for r in got}) == 1 and [r.seq for r in ordered] == list(range(n))
            assert ordered[-1].queue_offset - ordered[0].queue_offset == n - 1


def test_sdk_consumes_what_ali_ons_sent_with_a_sharding_key(features: Features) -> None:
    topic = own_topics(ALIONS)["sharding"]
    got = [r for r in features.sdk.records if r.topic == topic]
    assert sorted(r.seq for r in got) == list(range(COUNT))
    for record in got:
        check_intact(record, PEER_ORIGINS[ALIONS])


@pytest.mark.parametrize("peer", list(PEER_ORIGINS))
def test_peer_consumes_sdk_oneway_and_batch_sends(features: Features, peer: str) -> None:
    proc = features.consumers[peer]
    for topic in SDK_TOPICS:
        got = _records(proc, topic)
        assert sorted(r.seq for r in got) == list(range(COUNT)), f"{topic}: {proc.describe()}"
        for record in got:
            check_intact(record, "sdk")


@pytest.mark.parametrize("peer", list(PEER_ORIGINS))
def test_failed_message_is_redelivered_with_reconsume_times_1(features: Features, peer: str) -> None:
    proc = features.retriers[peer]
    assert proc.returncode == 0, proc.describe()
    failed, ok = proc.records("fail"), proc.records("msg")
    assert failed and all(r.reconsume_times == 0 for r in failed), proc.describe()
    # Only what the tag expression selects, each message exactly once after its failed delivery.
    assert {r.seq for r in failed} <= set(RETRY_SEQS), proc.describe()
    assert sorted(r.seq for r in ok) == RETRY_SEQS, proc.describe()
    for record in sorted(ok, key=lambda r: r.seq):
        # The client shows the original topic again (from the RETRY_TOPIC property the broker set).
        assert record.topic == RETRY_TOPIC and record.props.get("RETRY_TOPIC") == RETRY_TOPIC, record
        assert record.reconsume_times == 1, record
        assert record.body == fields("sdkretry", RETRY_TOPIC, record.seq)["body"].encode()
        assert record.props["color"] == "blue" and record.props["city"] == "Zürich"
        # The redelivered copy keeps the producer's id.
        assert record.props["UNIQ_KEY"] == features.retry_ids[record.seq]


@pytest.mark.parametrize("peer", list(PEER_ORIGINS))
def test_delayed_message_arrives_after_its_delay(features: Features, peer: str) -> None:
    """Delay level 2 (1 s on the test broker): held in SCHEDULE_TOPIC_XXXX, then put to the real topic,
    so the stored copy every consumer reads was stored at least ~1 s after the producer made it."""
    topic = own_topics(peer)["delay"]
    for where, got in (("peer", _records(features.consumers[peer], topic)),
                       ("sdk", [r for r in features.sdk.records if r.topic == topic])):  # fmt: skip
        assert sorted(r.seq for r in got) == list(range(COUNT)), f"{where}: {[r.seq for r in got]}"
        for record in got:
            check_intact(record, PEER_ORIGINS[peer])
            assert record.store_ts - record.born_ts >= 900, f"{where}: not delayed: {record}"
            assert "DELAY" not in record.props, f"{where}: DELAY left on the delivered copy: {record}"


def test_cpp044_compressed_batch_is_refused_with_the_reason(features: Features, servers: ServerPair) -> None:
    """Known client issue: 0.4.4 compresses a batch over 4 KiB as one body. Our broker answers
    MESSAGE_ILLEGAL (13) with a remark naming the malformed batch, and stores none of it."""
    producer = features.producers[CPP044]
    assert [e["topic"] for e in producer.of("send_error")] == [BIG_BATCH_TOPIC], producer.describe()
    client_log = "".join(p.read_text(errors="replace") for p in (producer.home / "logs").rglob("*.log*") if p.is_file())
    assert "malformed batch body" in client_log and "error code:13" in client_log, client_log[-2000:]
    with BlockingAdmin(servers.namesrv_addr) as admin:
        assert all(p.broker_offset == 0 for p in admin.consumer_progress("CID-iop-none", BIG_BATCH_TOPIC))


@pytest.mark.parametrize("peer", CPP)
def test_cpp_pull_consumer_reads_queues_with_a_tag_filter(features: Features, peer: str) -> None:
    """PullConsumer.pull: route, then PULL_MESSAGE per queue from offset 0 without long polling."""
    proc = features.pullers[peer]
    assert proc.returncode == 0, proc.describe()
    for topic in SDK_TOPICS:
        got = _records(proc, topic)
        assert sorted(r.seq for r in got) == PULL_SEQS, f"{topic}: {proc.describe()}"
        for record in got:
            check_intact(record, "sdk")
