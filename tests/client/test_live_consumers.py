"""Live: producers and push/pull consumers against a real in-process NameServer and broker.

The scenarios: 10 000 mixed messages consumed exactly once by two push consumers of
one group, a broadcasting pair that each see everything, the pull consumer, and consumers resuming
from committed offsets after a broker restart.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from broker.client import (
    ClientConfig,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
)
from broker.transport.loop import run
from tests.client.client_harness import LiveCluster, live_cluster

TAGS = ("a", "b", "c")


def make_message(topic: str, i: int) -> Message:
    return Message(
        topic,
        f"body-{i}-".encode() + bytes([i % 256]) * (i % 50),
        tags=TAGS[i % 3],
        keys=[f"k{i}", f"order-{i % 17}"],
        properties={"idx": str(i), "unicode": "ünï-çødé"},
    )


async def produce(cluster: LiveCluster, topic: str, start: int, count: int) -> dict[str, int]:
    """Send `count` messages: half pipelined single sends, half batches. Returns msg_id -> index."""
    ids: dict[str, int] = {}
    async with Producer("PG-live", cluster.namesrv_addr) as producer:
        half = count // 2
        for chunk in range(start, start + half, 64):
            idx = list(range(chunk, min(chunk + 64, start + half)))
            results = await asyncio.gather(*(producer.send(make_message(topic, i)) for i in idx))
            for i, r in zip(idx, results, strict=True):
                assert r.status is SendStatus.SEND_OK
                ids[r.msg_id] = i
        for chunk in range(start + half, start + count, 100):
            idx = list(range(chunk, min(chunk + 100, start + count)))
            msgs = [make_message(topic, i) for i in idx]
            (result,) = await producer.send_batch(msgs)
            assert result.queue_offset >= 0
            for i, m in zip(idx, msgs, strict=True):
                assert m.uniq_key is not None
                ids[m.uniq_key] = i
    return ids


def check_message(msg: MessageExt, ids: dict[str, int]) -> None:
    i = ids[msg.msg_id]
    expected = make_message(msg.topic, i)
    assert msg.body == expected.body
    assert msg.tags == expected.tags
    assert msg.keys == expected.keys
    assert msg.properties["idx"] == str(i) and msg.properties["unicode"] == "ünï-çødé"


async def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def push_consumer(
    cluster: LiveCluster, group: str, name: str, seen: list[MessageExt], **options: object
) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        client_config=ClientConfig(namesrv_addr=cluster.namesrv_addr, instance_name=name),
        **options,  # type: ignore[arg-type]
    )
    consumer.register_listener(listener)
    return consumer


def test_two_push_consumers_share_10000_messages_exactly_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("LiveT", queues=4)
            seen1: list[MessageExt] = []
            seen2: list[MessageExt] = []
            c1 = push_consumer(cluster, "CG-pair", "c1", seen1)
            c2 = push_consumer(cluster, "CG-pair", "c2", seen2)
            for c in (c1, c2):
                c.subscribe("LiveT", "*")
            await c1.start()
            await c2.start()
            try:

                def split_done() -> bool:
                    a = {q for q in c1.assignment() if q.topic == "LiveT"}
                    b = {q for q in c2.assignment() if q.topic == "LiveT"}
                    return len(a) == 2 and len(b) == 2 and not a & b

                await wait_for(split_done, 30, "the two consumers to split the four queues")
                ids = await produce(cluster, "LiveT", 0, 10_000)
                assert len(ids) == 10_000
                await wait_for(lambda: len(seen1) + len(seen2) >= 10_000, 90, "10 000 messages consumed")
                await asyncio.sleep(0.5)  # anything extra (a duplicate) would arrive now
                counts = Counter(m.msg_id for m in seen1 + seen2)
                assert len(counts) == 10_000 and set(counts) == set(ids)
                assert max(counts.values()) == 1, "a message was consumed twice"
                assert seen1 and seen2
                assert {m.queue_id for m in seen1}.isdisjoint({m.queue_id for m in seen2})
                for m in seen1 + seen2:
                    check_message(m, ids)
            finally:
                await c1.shutdown()
                await c2.shutdown()

    run(main())


def test_broadcasting_pair_each_see_everything_and_tag_filter(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("BcastT", queues=3)
            seen_all: list[MessageExt] = []
            seen_ab: list[MessageExt] = []
            opts = {"message_model": MessageModel.BROADCASTING, "offset_store_dir": str(tmp_path / "offsets")}
            c_all = push_consumer(cluster, "CG-bcast", "b1", seen_all, **opts)
            c_ab = push_consumer(cluster, "CG-bcast", "b2", seen_ab, **opts)
            c_all.subscribe("BcastT", "*")
            c_ab.subscribe("BcastT", "a || b")
            await c_all.start()
            await c_ab.start()
            try:
                ids = await produce(cluster, "BcastT", 0, 900)
                await wait_for(lambda: len(seen_all) >= 900 and len(seen_ab) >= 600, 60, "both consumers")
                await asyncio.sleep(0.3)
                assert Counter(m.msg_id for m in seen_all) == Counter(set(ids))
                assert sorted(m.msg_id for m in seen_ab) == sorted(k for k, i in ids.items() if i % 3 != 2)
                assert all(m.tags in ("a", "b") for m in seen_ab)
            finally:
                await c_all.shutdown()
                await c_ab.shutdown()
            # Broadcasting offsets are local files, one per client.
            files = sorted(p.parent.parent.name for p in (tmp_path / "offsets").rglob("offsets.json"))
            assert files == ["127.0.0.1@b1", "127.0.0.1@b2"]

    run(main())


def test_pull_consumer_resumes_from_committed_offsets_after_broker_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("PullT", queues=2)
            ids = await produce(cluster, "PullT", 0, 2000)
            first: list[MessageExt] = []
            consumer = PullConsumer("CG-pull", cluster.namesrv_addr, consume_from_where=4, auto_commit=False)
            consumer.subscribe("PullT")
            async with consumer:
                while len(first) < 1000:
                    first += await consumer.poll(2.0)
                await consumer.commit()
            committed = {m.msg_id for m in first}
            await cluster.restart_broker()
            more = await produce(cluster, "PullT", 2000, 200)
            rest: list[MessageExt] = []
            consumer = PullConsumer("CG-pull", cluster.namesrv_addr, consume_from_where=4)
            consumer.subscribe("PullT")
            async with consumer:
                deadline = time.monotonic() + 60
                while len(committed) + len(rest) < 2200 and time.monotonic() < deadline:
                    rest += await consumer.poll(1.0)
            rest_ids = [m.msg_id for m in rest]
            assert len(rest_ids) == len(set(rest_ids))
            assert committed.isdisjoint(rest_ids), "messages before the committed offset came back"
            assert committed | set(rest_ids) == set(ids) | set(more)

    run(main())


def test_push_consumer_keeps_consuming_across_a_broker_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("RestartT", queues=2)
            seen: list[MessageExt] = []
            consumer = push_consumer(cluster, "CG-restart", "r1", seen)
            consumer.subscribe("RestartT")
            await consumer.start()
            try:
                ids = await produce(cluster, "RestartT", 0, 1000)
                await wait_for(lambda: len(seen) >= 1000, 30, "the first 1000 messages")
                await asyncio.sleep(0.2)
                await consumer.offset_store.persist_all(consumer.assignment())  # type: ignore[union-attr]
                await asyncio.sleep(0.2)  # one-way commits reach the broker
                await cluster.restart_broker()
                ids.update(await produce(cluster, "RestartT", 1000, 500))
                await wait_for(lambda: len({m.msg_id for m in seen}) >= 1500, 60, "messages after the restart")
                counts = Counter(m.msg_id for m in seen)
                assert set(counts) == set(ids)
                assert sum(counts.values()) - len(counts) == 0, "committed messages were redelivered"
            finally:
                await consumer.shutdown()

    run(main())
