"""Live: retries, orderly consumption, auto-created topics, compression, send modes, admin, blocking facade."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from pathlib import Path

from broker.client import (
    Admin,
    BlockingProducer,
    BlockingPullConsumer,
    ClientConfig,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
    select_by_hash,
)
from broker.client.errors import ClientError, MessageTooLarge
from broker.protocol.message import SysFlag
from broker.transport.loop import run
from tests.client.client_harness import live_cluster


async def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def test_reconsume_later_redelivers_through_the_retry_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("RetryT", queues=1)
            attempts: dict[str, list[MessageExt]] = defaultdict(list)

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                for m in msgs:
                    attempts[m.msg_id].append(m)
                # Fail every message twice, then accept it.
                return (
                    ConsumeStatus.RECONSUME_LATER
                    if len(attempts[msgs[0].msg_id]) < 3
                    else ConsumeStatus.CONSUME_SUCCESS
                )

            consumer = PushConsumer(
                "CG-retry",
                cluster.namesrv_addr,
                delay_level_when_next_consume=1,
                rebalance_interval=0.5,
                client_config=ClientConfig(namesrv_addr=cluster.namesrv_addr, poll_name_server_interval=0.5),
            )
            consumer.subscribe("RetryT", "*")
            consumer.register_listener(listener)
            await consumer.start()
            try:
                async with Producer("PG-retry", cluster.namesrv_addr) as producer:
                    sent = [await producer.send(Message("RetryT", f"r{i}", tags="t")) for i in range(3)]
                await wait_for(lambda: all(len(attempts[s.msg_id]) >= 3 for s in sent), 40, "three attempts each")
                for s in sent:
                    tries = attempts[s.msg_id]
                    assert [m.reconsume_times for m in tries[:3]] == [0, 1, 2]
                    assert all(m.topic == "RetryT" for m in tries), "retry deliveries show the original topic"
                    assert tries[1].body == tries[0].body
            finally:
                await consumer.shutdown()

    run(main())


def test_orderly_listener_keeps_per_key_order_and_retries_in_place(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("OrderT", queues=4)
            seen: dict[str, list[int]] = defaultdict(list)
            failed_once: set[str] = set()
            active: set[int] = set()
            overlap = []

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                q = msgs[0].queue_id
                if q in active:
                    overlap.append(q)
                active.add(q)
                try:
                    await asyncio.sleep(0.001)
                    m = msgs[0]
                    if m.properties["seq"] == "5" and m.msg_id not in failed_once:
                        failed_once.add(m.msg_id)
                        return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    for m in msgs:
                        seen[m.keys[0]].append(int(m.properties["seq"]))
                    return ConsumeStatus.CONSUME_SUCCESS
                finally:
                    active.discard(q)

            consumer = PushConsumer("CG-order", cluster.namesrv_addr, suspend_current_queue_time=0.2)
            consumer.subscribe("OrderT", "*")
            consumer.register_listener(listener, orderly=True)
            await consumer.start()
            try:
                async with Producer("PG-order", cluster.namesrv_addr) as producer:
                    for seq in range(20):
                        for key in ("alpha", "beta", "gamma"):
                            msg = Message("OrderT", f"{key}-{seq}", keys=key, properties={"seq": str(seq)})
                            await producer.send(msg, selector=select_by_hash, arg=key)
                await wait_for(lambda: all(len(seen[k]) == 20 for k in ("alpha", "beta", "gamma")), 30, "all")
                for key in ("alpha", "beta", "gamma"):
                    assert seen[key] == list(range(20)), key
                assert len(failed_once) == 3
                assert overlap == [], "two batches of one queue ran at the same time"
            finally:
                await consumer.shutdown()

    run(main())


def test_send_modes_autocreate_compression_and_admin(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path, autoCreateTopicEnable="true") as cluster:
            async with Producer("PG-modes", cluster.namesrv_addr) as producer:
                # Topic unknown to the NameServer: the TBW102 route is used and the broker creates it.
                first = await producer.send(Message("AutoT", b"hello", keys="auto-key"))
                assert first.status is SendStatus.SEND_OK
                big = bytes(range(256)) * 64  # 16 KiB: compressed on the wire
                big_result = await producer.send(Message("AutoT", big, keys="big-key"))
                done = asyncio.Event()
                outcome = {}

                def callback(result, exc) -> None:  # type: ignore[no-untyped-def]
                    outcome["result"], outcome["exc"] = result, exc
                    done.set()

                task = producer.send_async(Message("AutoT", b"async"), callback)
                await asyncio.wait_for(done.wait(), 10)
                assert outcome["exc"] is None and (await task).msg_id == outcome["result"].msg_id
                await producer.send_oneway(Message("AutoT", b"oneway"))
                try:
                    await producer.send(Message("AutoT", b"x" * (4 * 1024 * 1024 + 1)))
                    raise AssertionError("oversized message was accepted")
                except MessageTooLarge:
                    pass
                try:
                    await producer.send(Message("bad topic!", b"x"))
                    raise AssertionError("invalid topic was accepted")
                except ClientError as exc:
                    assert "may contain only" in str(exc)

            async with Admin(cluster.namesrv_addr) as admin:
                assert "AutoT" in await admin.topic_list()
                route = await admin.topic_route("AutoT")
                assert route.master_addr("broker-c") == cluster.broker.addr  # type: ignore[union-attr]
                rows = await admin.cluster_list()
                assert [(r.cluster, r.broker_name, r.broker_id) for r in rows] == [("ClientTestCluster", "broker-c", 0)]
                assert await admin.create_topic("AdminT", read_queue_nums=3, write_queue_nums=3) == [
                    cluster.broker.addr  # type: ignore[union-attr]
                ]
                # The broker registers the new topic with the NameServer right after creating it.
                for _ in range(100):
                    if "AdminT" in await admin.topic_list():
                        break
                    await asyncio.sleep(0.05)
                assert (await admin.topic_route("AdminT")).queue_datas[0].write_queue_nums == 3
                viewed = await admin.view_message(big_result.offset_msg_id)
                assert viewed.body == big and not viewed.sys_flag & SysFlag.COMPRESSED
                by_key = await admin.query_message_by_key("AutoT", "auto-key")
                assert [m.body for m in by_key] == [b"hello"]
                by_id = await admin.query_message_by_uniq_key("AutoT", first.msg_id)
                assert [m.msg_id for m in by_id] == [first.msg_id]
                progress = await admin.consumer_progress("nobody", "AutoT")
                assert sum(p.broker_offset for p in progress) == 4
                assert all(p.consumer_offset == -1 for p in progress)

    run(main())


def test_blocking_facade_from_plain_threads(tmp_path: Path) -> None:
    ready = threading.Event()
    stop = threading.Event()
    addr: dict[str, str] = {}
    errors: list[BaseException] = []

    async def serve() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("BlockT", queues=2)
            addr["ns"] = cluster.namesrv_addr
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    def server_thread() -> None:
        try:
            run(serve())
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
            ready.set()

    t = threading.Thread(target=server_thread, daemon=True)
    t.start()
    assert ready.wait(30) and not errors
    try:
        with BlockingProducer("PG-block", addr["ns"]) as producer:
            results = [producer.send(Message("BlockT", f"b{i}", tags="x")) for i in range(10)]
            future = producer.send_async(Message("BlockT", "b-async"))
            results.append(future.result(10))
            results += producer.send_batch([Message("BlockT", f"batch{i}") for i in range(5)])
        assert all(r.status is SendStatus.SEND_OK for r in results)
        consumer = BlockingPullConsumer("CG-block", addr["ns"], consume_from_where=4)
        consumer.subscribe("BlockT")
        with consumer:
            got: list[MessageExt] = []
            deadline = time.monotonic() + 30
            while len(got) < 16 and time.monotonic() < deadline:
                got += consumer.poll(1.0)
            mq = next(iter(m for m in got if m.queue_id == 0))
            queue0 = consumer.fetch_queues("BlockT")[0]
            consumer.seek_to_begin(queue0)  # replay queue 0 from its first message
            replay: list[MessageExt] = []
            while not replay and time.monotonic() < deadline:
                replay = consumer.poll(1.0)
        assert len(got) == 16
        assert {m.body for m in got} == {f"b{i}".encode() for i in range(10)} | {b"b-async"} | {
            f"batch{i}".encode() for i in range(5)
        }
        assert replay and replay[0].queue_id == mq.queue_id and replay[0].queue_offset == 0
    finally:
        stop.set()
        t.join(30)
    assert not errors
