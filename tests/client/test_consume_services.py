"""The push consumer's consume services and the retry copy they send, over a real broker on loopback TCP.

The copy of a failed message that a consumer sends to %RETRY%<group> itself is built in one place
(consume.retry_message) for both services: a table of its fields for a concurrent failure (CONSUMER_SEND_MSG_BACK
refused: the copy carries the next delay level and one more reconsume) and an orderly one (maxReconsumeTimes
used up in place: no delay, the broker stores it in %DLQ%<group>); then the same two failures run through the
real services, and the records the broker stored are read back, with the offset each service commits. Last, the
orderly service's broker locks: a queue another client holds is not admitted nor pulled until it is released.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from broker.client import ConsumeStatus, Message, MessageExt, Producer, PullConsumer
from broker.client.config import ConsumerConfig
from broker.client.consume import ListenerRunner, retry_message
from broker.client.consume_service import (
    ConcurrentConsumeService,
    ConsumeContext,
    ConsumeService,
    OrderlyConsumeService,
)
from broker.client.consumer_rt_tps import ConsumerStats
from broker.client.instance import ClientInstance
from broker.client.message import MessageQueue
from broker.client.offset_store import LocalFileOffsetStore
from broker.client.process_queue import ProcessQueue
from broker.protocol.message import decode_records
from broker.protocol.properties import Prop
from broker.transport.loop import run
from tests.client.client_harness import LiveCluster, live_cluster

GROUP = "CG-svc"
RETRY = f"%RETRY%{GROUP}"
MAX_TIMES = 3
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

# kind -> (reconsume_times of the failed message, RECONSUME_TIME of the copy, DELAY of the copy (None: absent))
RETRY_FIELDS = {
    "concurrent": (1, 2, "4"),  # send-back refused: one more reconsume, delay level 3 + reconsume_times
    "orderly": (MAX_TIMES, MAX_TIMES, None),  # retried in place MAX_TIMES times: to the DLQ, no delay
}


async def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def pulled_messages(cluster: LiveCluster, topic: str, n: int) -> list[MessageExt]:
    """`n` messages as a consumer of GROUP receives them (the group and its %RETRY% topic now exist)."""
    async with Producer("PG-svc", client_config=cluster.client_config()) as producer:
        for i in range(n):
            await producer.send(Message(topic, f"body-{i}", tags="tagA", keys=f"key-{i}", properties={"app": str(i)}))
    where = "CONSUME_FROM_FIRST_OFFSET"
    consumer = PullConsumer(GROUP, client_config=cluster.client_config(), consume_from_where=where)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[MessageExt] = []
        while len(got) < n:
            got += await consumer.poll(5.0)
        return got
    finally:
        await consumer.shutdown()


def stored(cluster: LiveCluster, topic: str, queue_id: int) -> list[MessageExt]:
    result = cluster.running_broker.store.get_message("t", topic, queue_id, 0, 32)
    try:
        return list(decode_records(b"".join(result.buffers)))
    finally:
        result.release()


@pytest.mark.parametrize("kind", sorted(RETRY_FIELDS))
def test_the_retry_copy_carries_the_fields_of_each_kind_of_failure(tmp_path: Path, kind: str) -> None:
    reconsumed, reconsume_time, delay = RETRY_FIELDS[kind]

    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SvcT", queues=1)
            (msg,) = await pulled_messages(cluster, "SvcT", 1)
            msg.reconsume_times = reconsumed
            msg.properties[Prop.DELAY] = "7"  # a delay the original was sent with: never the copy's
            copy = retry_message(msg, RETRY, MAX_TIMES, reconsume_time, None if delay is None else int(delay))
            fields = {k: copy.properties.get(k) for k in (Prop.RETRY_TOPIC, Prop.ORIGIN_MESSAGE_ID, Prop.DELAY)}
            assert (copy.topic, copy.body, copy.flag) == (RETRY, b"body-0", msg.flag)
            assert fields == {Prop.RETRY_TOPIC: "SvcT", Prop.ORIGIN_MESSAGE_ID: msg.msg_id, Prop.DELAY: delay}
            assert copy.properties[Prop.RECONSUME_TIME] == str(reconsume_time)
            assert copy.properties[Prop.MAX_RECONSUME_TIMES] == str(MAX_TIMES)
            assert (copy.properties["app"], copy.properties[Prop.TAGS], copy.properties[Prop.KEYS]) == (
                "0",
                "tagA",
                "key-0",
            )
            # A message consumed from %RETRY% already names its first topic and id: the copy keeps them.
            again = retry_message(
                MessageExt(RETRY, b"b", properties=dict(copy.properties)), RETRY, MAX_TIMES, reconsume_time + 1, 5
            )
            assert again.properties[Prop.RETRY_TOPIC] == "SvcT"
            assert again.properties[Prop.ORIGIN_MESSAGE_ID] == msg.msg_id

    run(main())


class Services:
    """A consume service of GROUP on its own started instance and inner producer, as PushConsumer.start()
    builds it, with a listener that always fails."""

    def __init__(self, cluster: LiveCluster, tmp_path: Path, name: str = "svc") -> None:
        self.config = ConsumerConfig(group=GROUP, max_reconsume_times=MAX_TIMES)
        self.instance = ClientInstance(cluster.client_config(instance_name=name))
        self.producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
        self.offsets = LocalFileOffsetStore(str(tmp_path / "offsets"), self.instance.client_id, GROUP)
        self.runner = ListenerRunner(lambda msgs: ConsumeStatus.RECONSUME_LATER, 1)

    async def __aenter__(self) -> Services:
        await self.instance.start()
        await self.producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.shutdown()
        await self.instance.close()
        self.runner.close()

    def build(self, orderly: bool) -> ConsumeService:
        ctx = ConsumeContext(self.config, self.instance, self.runner, self.offsets, ConsumerStats(), self.producer)
        return OrderlyConsumeService(ctx, dict) if orderly else ConcurrentConsumeService(ctx)


def test_a_concurrent_and_an_orderly_failure_reach_the_broker_as_the_table_says(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SvcT", queues=1)
            first, second = await pulled_messages(cluster, "SvcT", 2)
            async with Services(cluster, tmp_path) as services:

                async def retry_route() -> bool:
                    return await services.instance.update_route(RETRY) is not None

                await wait_for(retry_route, 10, f"the route of {RETRY} (made by the heartbeat)")
                mq = MessageQueue("SvcT", cluster.broker_name, 0)

                # Concurrent: the broker refuses CONSUMER_SEND_MSG_BACK (no message at that CommitLog offset),
                # so the service sends the copy to %RETRY% itself; due at delay level 4, it waits in the schedule
                # topic's queue 3. The queue's offset moves past the message: it is not consumed here again.
                first.reconsume_times = RETRY_FIELDS["concurrent"][0]
                first.commit_log_offset = 1 << 40
                pq = ProcessQueue()
                concurrent = services.build(orderly=False)
                concurrent.submit(mq, pq, [first])
                await concurrent.shutdown(drain_timeout=10)
                assert pq.msg_count == 0
                assert services.offsets.table[mq] == first.queue_offset + 1

                # Orderly: the batch was retried in place MAX_TIMES times; the service gives up, sends the copy,
                # the broker stores it in %DLQ%, and the queue moves past it.
                second.reconsume_times = RETRY_FIELDS["orderly"][0]
                pq = ProcessQueue()
                pq.put_messages([second])
                batch = pq.take_messages(1)
                orderly = services.build(orderly=True)
                await orderly.process_result(mq, pq, batch, ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)
                assert pq.msg_count == 0
                assert services.offsets.table[mq] == second.queue_offset + 1

            (parked,) = stored(cluster, SCHEDULE_TOPIC, 3)
            (dead,) = stored(cluster, f"%DLQ%{GROUP}", 0)
            for kind, original, record in (("concurrent", first, parked), ("orderly", second, dead)):
                _, reconsume_time, delay = RETRY_FIELDS[kind]
                assert record.body == original.body, kind
                assert record.reconsume_times == reconsume_time, kind
                assert record.properties[Prop.RETRY_TOPIC] == "SvcT", kind
                assert record.properties[Prop.ORIGIN_MESSAGE_ID] == original.msg_id, kind
                assert record.properties[Prop.MAX_RECONSUME_TIMES] == str(MAX_TIMES), kind
                assert record.properties.get(Prop.DELAY) == delay, kind
                assert record.properties["app"] == original.properties["app"], kind
            assert parked.properties[Prop.REAL_TOPIC] == RETRY

    run(main())


def test_an_orderly_service_admits_a_queue_only_while_no_other_client_holds_its_broker_lock(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("LockT", queues=2)
            mq = MessageQueue("LockT", cluster.broker_name, 0)
            async with Services(cluster, tmp_path, "A") as a, Services(cluster, tmp_path, "B") as b:
                first, second = a.build(orderly=True), b.build(orderly=True)
                pq_a, pq_b = ProcessQueue(), ProcessQueue()
                assert await first.admit(mq, pq_a) and pq_a.locked  # LOCK_BATCH_MQ granted to A
                assert await first.ready(mq, pq_a)
                assert not await second.admit(mq, pq_b) and not pq_b.locked  # the broker keeps it A's
                assert not await second.ready(mq, pq_b)  # no pulls for a queue we do not hold
                assert await b.build(orderly=False).admit(mq, ProcessQueue())  # concurrent needs no lock
                # B may lock the other queue: locks are per queue
                assert await second.admit(MessageQueue("LockT", cluster.broker_name, 1), ProcessQueue())

                await first.release([mq])  # UNLOCK_BATCH_MQ (one-way): B gets the queue at a later attempt

                async def b_admitted() -> bool:
                    return await second.admit(mq, pq_b)

                await wait_for(b_admitted, 10, "B to lock the queue A released")
                assert pq_b.locked and await second.ready(mq, pq_b)
                assert not await first.admit(mq, ProcessQueue())

    run(main())
