"""Ordered messages over real TCP: partition order by sharding key across a consumer restart, global
order on a one-queue topic, broker-side lock renewal, and a message that an orderly group keeps
failing going to the DLQ after maxReconsumeTimes in-place retries (8.4)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest

from broker.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer, select_by_hash
from broker.client import push_consumer as push_consumer_module
from broker.protocol.bodies import MessageQueue
from broker.protocol.message import decode_records
from broker.protocol.properties import Prop
from broker.transport.loop import run
from tests.features.features_harness import FeaturesCluster, features_cluster, wait_for

ORDERS = [f"order-{n}" for n in range(6)]
STEPS = 8


def _orderly(cluster: FeaturesCluster, group: str, **options: object) -> PushConsumer:
    return PushConsumer(
        group,
        client_config=cluster.client_config(),
        suspend_current_queue_time=0.1,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        **options,
    )


def test_partition_order_per_sharding_key_survives_a_consumer_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("OrdT", queues=4, order=True)
            first: dict[str, list[int]] = defaultdict(list)
            second: dict[str, list[int]] = defaultdict(list)
            target = first
            suspended: set[str] = set()

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                for m in msgs:
                    key, step = m.keys[0], int(m.properties["step"])
                    if key == "order-0" and step == 3 and m.msg_id not in suspended:
                        suspended.add(m.msg_id)  # retried in place: later steps of its queue wait
                        return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    target[key].append(step)
                await asyncio.sleep(0.005)
                return ConsumeStatus.CONSUME_SUCCESS

            async with Producer("PG-ord", client_config=cluster.client_config()) as producer:
                for step in range(STEPS):  # interleaved orders
                    for key in ORDERS:
                        msg = Message("OrdT", f"{key}/{step}", keys=key, properties={"step": str(step)})
                        await producer.send(msg, selector=select_by_hash, arg=key)
                consumer = _orderly(cluster, "CG-ord")
                consumer.subscribe("OrdT", "*")
                consumer.register_listener(listener, orderly=True)
                await consumer.start()
                await wait_for(lambda: sum(map(len, first.values())) >= len(ORDERS) * STEPS // 2, 20, "half")
                await consumer.shutdown()  # commits what it consumed and unlocks its queues
                target = second
                restarted = _orderly(cluster, "CG-ord")
                restarted.subscribe("OrdT", "*")
                restarted.register_listener(listener, orderly=True)
                await restarted.start()
                try:
                    # more steps arrive while the new consumer runs
                    for step in range(STEPS, STEPS + 2):
                        for key in ORDERS:
                            msg = Message("OrdT", f"{key}/{step}", keys=key, properties={"step": str(step)})
                            await producer.send(msg, selector=select_by_hash, arg=key)
                    done = lambda: all(  # noqa: E731
                        (second[k] or first[k])[-1] == STEPS + 1 if (second[k] or first[k]) else False for k in ORDERS
                    )
                    await wait_for(done, 20, "every order to finish")
                finally:
                    await restarted.shutdown()
            assert suspended, "the suspend case was exercised"
            for key in ORDERS:
                before, after = first[key], second[key]
                assert before == sorted(before) and len(set(before)) == len(before), (key, before)
                assert after == sorted(after) and len(set(after)) == len(after), (key, after)
                # the restart continues where the first consumer stopped: no gap, no step twice
                assert before + after == list(range(STEPS + 2)), (key, before, after)

    run(main())


def test_global_order_on_one_queue_and_lock_renewal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_consumer_module, "REBALANCE_LOCK_INTERVAL", 0.3)

    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("GlobalT", queues=1, order=True)
            got: list[int] = []

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                got.extend(int(m.body) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = _orderly(cluster, "CG-global", consume_message_batch_max_size=3)
            consumer.subscribe("GlobalT", "*")
            consumer.register_listener(listener, orderly=True)
            await consumer.start()
            try:
                async with Producer("PG-global", client_config=cluster.client_config()) as producer:
                    for i in range(30):
                        await producer.send(Message("GlobalT", str(i)))
                await wait_for(lambda: len(got) == 30, 20, "30 messages")
                assert got == list(range(30))
                locks = cluster.running_broker.locks
                mq = MessageQueue("GlobalT", "broker-f", 0)
                assert locks.is_locked("CG-global", mq, consumer.instance.client_id)
                first = locks._table["CG-global"][mq].last_update
                await wait_for(lambda: locks._table["CG-global"][mq].last_update > first, 5, "a lock renewal")
                assert not locks.try_lock_batch("CG-global", [mq], "someone-else")
            finally:
                await consumer.shutdown()
            # shutdown unlocked the queue: another client gets it at once
            assert cluster.running_broker.locks.try_lock_batch("CG-global", [mq], "someone-else") == [mq]

    run(main())


def test_orderly_group_sends_a_message_failing_max_times_to_the_dlq(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("OrdDlqT", queues=1, order=True)
            attempts: list[int] = []
            consumed: list[str] = []

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                m = msgs[0]
                if m.body == b"poison":
                    attempts.append(m.reconsume_times)
                    return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                consumed.append(m.body.decode())
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = _orderly(cluster, "CG-ord-dlq", max_reconsume_times=2)
            consumer.subscribe("OrdDlqT", "*")
            consumer.register_listener(listener, orderly=True)
            await consumer.start()
            try:
                async with Producer("PG-ord-dlq", client_config=cluster.client_config()) as producer:
                    await producer.send(Message("OrdDlqT", "ok-0"))
                    poison = await producer.send(Message("OrdDlqT", "poison"))
                    await producer.send(Message("OrdDlqT", "ok-1"))
                await wait_for(lambda: consumed == ["ok-0", "ok-1"], 15, "the queue to move past the poison")
                assert attempts == [0, 1, 2]  # retried in place, never through %RETRY%
            finally:
                await consumer.shutdown()
            store = cluster.running_broker.store
            await wait_for(lambda: store.get_max_offset_in_queue("%DLQ%CG-ord-dlq", 0) == 1, 5, "the DLQ entry")
            got = store.get_message("t", "%DLQ%CG-ord-dlq", 0, 0, 8)
            (dead,) = list(decode_records(b"".join(got.buffers)))
            got.release()
            assert dead.body == b"poison" and dead.reconsume_times == 2
            assert dead.properties[Prop.ORIGIN_MESSAGE_ID] == poison.msg_id
            assert dead.properties[Prop.RETRY_TOPIC] == "OrdDlqT"
            assert store.get_max_offset_in_queue("%RETRY%CG-ord-dlq", 0) == 0

    run(main())
