"""Broker metrics over real TCP: a real NameServer and broker with metricsExporterType=PROM, a real
producer and consumer, and /metrics read with prometheus-client's text parser."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from broker.client import (
    Admin,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from broker.protocol.properties import Prop
from broker.store import MessageStore
from broker.transport.loop import run
from tests.local_cluster import local_cluster, wait_for
from tests.metrics.metrics_scrape import Scrape, scrape

PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"}
TOPIC = "MetricsTopic"
GROUP = "CG-metrics"
SIZES = (10, 900, 3000, 70_000)  # bodies in the message size buckets <= 1 KiB, 4 KiB, 4 KiB, 512 KiB
NODE = {"cluster": "MetricsCluster", "node_type": "broker", "node_id": "broker-m"}


def _cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    return local_cluster(tmp_path, cluster_name="MetricsCluster", broker_name="broker-m", **PROM)


def test_counters_equal_what_was_sent_and_consumed(tmp_path: Path) -> None:
    """Scrapes between rounds of sends and pulls; every counter equals what the clients saw, exactly."""

    async def main() -> None:
        async with _cluster(tmp_path) as cluster:
            port = cluster.running_broker.metrics.port
            await cluster.create_topic(TOPIC, queues=4)
            sent = 0
            rng = random.Random(26)
            consumed: list[bytes] = []
            consumer = PullConsumer(GROUP, cluster.namesrv_addr, consume_from_where=4, auto_commit=False)
            consumer.subscribe(TOPIC, "*")
            async with Producer("PG-metrics", cluster.namesrv_addr) as producer, consumer:
                for round_ in range(3):
                    for i in range(12):
                        body = rng.randbytes(SIZES[i % len(SIZES)])  # random: the producer's compression keeps it
                        result = await producer.send(Message(TOPIC, body, tags="t", keys=f"r{round_}-{i}"))
                        assert result.status is SendStatus.SEND_OK
                        sent += 1
                    # during the run: what was acknowledged so far, not a message more or less
                    during = await scrape(port)
                    assert during.value("rocketmq_messages_in_total", topic=TOPIC, **NODE) == sent
                    while len(consumed) < sent:
                        consumed += [m.body for m in await consumer.poll(1.0)]
                    assert len(consumed) == sent
                    await consumer.commit()
                    during = await scrape(port)
                    assert during.value("rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == sent
            final = await scrape(port)
            _check_final(final, sent)

    run(main())


def _check_final(s: Scrape, sent: int) -> None:
    labels = {"topic": TOPIC, "message_type": "normal", **NODE}
    assert s.value("rocketmq_messages_in_total", **labels) == sent
    stored_bytes = s.value("rocketmq_throughput_in_total", **labels)
    # whole stored records: more than the bodies, and exactly what the pulls returned
    assert stored_bytes > sum(SIZES) * sent // len(SIZES)
    assert s.value("rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) == stored_bytes
    assert s.value("rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == sent
    assert s.value("rocketmq_message_size_count", **labels) == sent
    assert s.value("rocketmq_message_size_sum", **labels) == stored_bytes
    # a quarter of the bodies each: 10 B (< 1 KiB with its headers), 900 B (just over), 3000 B, 70 kB
    assert s.value("rocketmq_message_size_bucket", le="1024.0", **labels) == sent // 4
    assert s.value("rocketmq_message_size_bucket", le="+Inf", **labels) == sent
    assert s.value("rocketmq_message_size_bucket", le="524288.0", **labels) == sent
    assert s.value("rocketmq_message_size_bucket", le="4096.0", **labels) == sent * 3 // 4
    # every send is one SEND_MESSAGE_V2 (or SEND_MESSAGE) answered SUCCESS
    sends = s.total("rocketmq_rpc_latency_count", request_code="send_message_v2", response_code="success")
    sends += s.total("rocketmq_rpc_latency_count", request_code="send_message", response_code="success")
    assert sends == sent
    lag = {"topic": TOPIC, "consumer_group": GROUP}
    assert s.value("rocketmq_consumer_lag_messages", is_retry="false", is_system="false", **lag) == 0
    assert s.value("rocketmq_consumer_inflight_messages", **lag) == 0
    assert s.value("rocketmq_consumer_ready_messages", **lag) == 0
    assert s.value("rocketmq_topic_number", **NODE) >= 1
    assert s.value("rocketmq_consumer_group_number", **NODE) >= 1
    assert s.value("rocketmq_storage_flush_behind_bytes", storage_type="local", storage_medium="disk") >= 0
    assert s.value("rocketmq_storage_size", **NODE) > stored_bytes


def test_consumer_lag_equals_consumer_progress(tmp_path: Path) -> None:
    """After a consumer committed part of a topic and left, the lag gauges equal what `mqadmin
    consumerProgress` (Admin.consumer_progress) reports at the same moment."""

    async def main() -> None:
        async with _cluster(tmp_path) as cluster:
            port = cluster.running_broker.metrics.port
            await cluster.create_topic(TOPIC, queues=4)
            async with Producer("PG-lag", cluster.namesrv_addr) as producer:
                for i in range(20):
                    await producer.send(Message(TOPIC, f"first-{i}".encode()))
                consumer = PullConsumer(GROUP, cluster.namesrv_addr, consume_from_where=4, auto_commit=False)
                consumer.subscribe(TOPIC, "*")
                async with consumer:
                    got = 0
                    while got < 20:
                        got += len(await consumer.poll(1.0))
                    await consumer.commit()
                for i in range(13):  # the lag
                    await producer.send(Message(TOPIC, f"second-{i}".encode()))
            broker = cluster.running_broker
            # quiesced: nothing is left to dispatch, so queue ends and offsets stand still
            await wait_for(lambda: broker.store.dispatch_behind_bytes == 0, 10, "dispatch to catch up")
            async with Admin(cluster.namesrv_addr) as admin:
                progress = await admin.consumer_progress(GROUP, TOPIC)
                s = await scrape(port)
            assert all(row.consumer_offset >= 0 for row in progress)  # every queue committed once
            expected = sum(row.lag for row in progress)
            assert expected == 13
            labels = {"topic": TOPIC, "consumer_group": GROUP, **NODE}
            assert s.value("rocketmq_consumer_lag_messages", **labels) == expected
            # the consumer left with nothing pulled beyond its commits: all of the lag is ready, none in flight
            assert s.value("rocketmq_consumer_ready_messages", **labels) == expected
            assert s.value("rocketmq_consumer_inflight_messages", **labels) == 0
            assert s.value("rocketmq_consumer_lag_latency", **labels) >= 0

    run(main())


def test_nothing_is_served_when_metrics_are_off(tmp_path: Path) -> None:
    async def main() -> None:
        async with local_cluster(tmp_path) as cluster:
            assert cluster.running_broker.metrics is None
            assert cluster.running_broker.meters is None
            async with Producer("PG-off", cluster.namesrv_addr) as producer:
                await cluster.create_topic(TOPIC, queues=1)
                assert (await producer.send(Message(TOPIC, b"x"))).status is SendStatus.SEND_OK

    run(main())


def test_scrape_while_sending(tmp_path: Path) -> None:
    """Scrapes interleaved with pipelined sends all answer, and never count a send twice or backwards."""

    async def main() -> None:
        async with _cluster(tmp_path) as cluster:
            port = cluster.running_broker.metrics.port
            await cluster.create_topic(TOPIC, queues=2)
            async with Producer("PG-load", cluster.namesrv_addr) as producer:
                sends = [asyncio.ensure_future(producer.send(Message(TOPIC, b"y" * 100))) for _ in range(300)]
                seen = [0.0]
                while not all(f.done() for f in sends):
                    s = await scrape(port)
                    value = sum(s.values("rocketmq_messages_in_total", topic=TOPIC))
                    assert value >= seen[-1]
                    seen.append(value)
                results = await asyncio.gather(*sends)
            ok = sum(r.status is SendStatus.SEND_OK for r in results)
            assert (await scrape(port)).value("rocketmq_messages_in_total", topic=TOPIC) == ok == 300

    run(main())


def test_sends_answered_after_the_flush_are_counted_exactly(tmp_path: Path) -> None:
    """SYNC_FLUSH answers a send once its group commit is on disk, after the read that brought it: such a
    put is in the ConsumeQueues by then, and counted once (broker/metrics/queue_scan.py)."""

    async def main() -> None:
        async with local_cluster(
            tmp_path, cluster_name="MetricsCluster", broker_name="broker-m", flushDiskType="SYNC_FLUSH", **PROM
        ) as cluster:
            port = cluster.running_broker.metrics.port
            await cluster.create_topic(TOPIC, queues=2)
            async with Producer("PG-sync", cluster.namesrv_addr) as producer:
                sent = 0
                for burst in (1, 40, 7):
                    sends = [producer.send(Message(TOPIC, b"z" * (300 + 2000 * (i % 2)))) for i in range(burst)]
                    results = await asyncio.gather(*sends)
                    assert all(r.status is SendStatus.SEND_OK for r in results)
                    sent += burst
                    s = await scrape(port)
                    labels = {"topic": TOPIC, "message_type": "normal", **NODE}
                    assert s.value("rocketmq_messages_in_total", **labels) == sent
                    assert s.value("rocketmq_message_size_count", **labels) == sent
                    assert s.total("rocketmq_rpc_latency_count", request_code="send_message_v2") == sent

    run(main())


def test_each_send_counts_once_under_its_type(tmp_path: Path) -> None:
    """Plain sends and a batch (read from the ConsumeQueues), a delayed, a FIFO and a transactional send
    (counted at their answer): each once, under its message_type. What the broker moves itself, the delay's
    delivery, the commit and a consumer's retry, is not a send. After a restart the counters start at zero,
    as RocketMQ's do, although the queues hold the earlier messages."""

    async def main() -> None:
        async with local_cluster(
            tmp_path, cluster_name="MetricsCluster", broker_name="broker-m", messageDelayLevel="1s 1s 1s 1s", **PROM
        ) as cluster:
            await cluster.create_topic(TOPIC, queues=2)
            retried: list[bytes] = []

            def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                if any(m.body == b"retry-me" and m.reconsume_times == 0 for m in msgs):
                    retried.append(b"retry-me")
                    return ConsumeStatus.RECONSUME_LATER
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer("CG-types", client_config=cluster.client_config(), consume_from_where=4)
            consumer.subscribe(TOPIC, "*")
            consumer.register_listener(listener)
            await consumer.start()
            tx = TransactionProducer(
                "PG-tx", client_config=cluster.client_config(), checker=lambda _m: LocalTransactionState.COMMIT_MESSAGE
            )
            await tx.start()
            try:
                async with Producer("PG-types", client_config=cluster.client_config()) as producer:
                    for body in (b"one", b"two", b"retry-me"):
                        await producer.send(Message(TOPIC, body))
                    await producer.send_batch([Message(TOPIC, b"b" * n) for n in (10, 2000, 5000)])
                    await producer.send(Message(TOPIC, b"later", delay_time_level=1))
                    await producer.send(Message(TOPIC, b"fifo", properties={Prop.SHARDING_KEY: "order-7"}))
                commit = LocalTransactionState.COMMIT_MESSAGE
                await tx.send_message_in_transaction(Message(TOPIC, b"tx"), lambda _m, _a: commit, None)
                store = cluster.running_broker.store
                retry_topic = "%RETRY%CG-types"
                await wait_for(lambda: _stored(store, TOPIC) == 9, 20, "the delivery and the commit")
                await wait_for(lambda: bool(retried) and _stored(store, retry_topic) == 1, 20, "the retry")
            finally:
                await tx.shutdown()
                await consumer.shutdown()
            s = await scrape(cluster.running_broker.metrics.port)
            for mtype, count in (("normal", 6), ("delay", 1), ("fifo", 1), ("transaction", 1)):
                labels = {"topic": TOPIC, "message_type": mtype, **NODE}
                assert s.value("rocketmq_messages_in_total", **labels) == count, mtype
                assert s.value("rocketmq_message_size_count", **labels) == count, mtype
            assert s.total("rocketmq_messages_in_total") == 9  # no series for the retry topic or the broker's own
            normal = {"topic": TOPIC, "message_type": "normal", **NODE}
            assert s.value("rocketmq_message_size_bucket", le="1024.0", **normal) == 4  # three plain, one of the batch
            assert s.value("rocketmq_message_size_bucket", le="4096.0", **normal) == 5

            await cluster.restart_broker()
            async with Producer("PG-types", client_config=cluster.client_config()) as producer:
                await producer.send(Message(TOPIC, b"after the restart"))
            s = await scrape(cluster.running_broker.metrics.port)
            assert s.total("rocketmq_messages_in_total") == 1

    run(main())


def _stored(store: MessageStore, topic: str) -> int:
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(4))
