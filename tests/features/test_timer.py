"""Timed delivery to the millisecond over real TCP: RocketMQ 5's TIMER_DELIVER_MS / TIMER_DELAY_SEC /
TIMER_DELAY_MS and RocketMQ 4's __STARTDELIVERTIME park a message in rmq_sys_wheel_timer until its
time, then it is stored in its real topic and queue with the user's properties; a time in the past
means now; past timerMaxDelaySec, with an unreadable value, in a batch or with timerWheelEnable=false
the send is refused and nothing is stored; pending timers survive a graceful restart and a kill -9
with SYNC_FLUSH (a subprocess broker), each delivered once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.client import Message, MessageQueue, Producer, PullConsumer
from broker.client.errors import BrokerSystemError, MessageIllegal
from broker.protocol.message import MessageExt, decode_records
from broker.server.timer_message import TIMER_DEQUEUE_MS, TIMER_ENQUEUE_MS, TIMER_OUT_MS, TIMER_TOPIC
from broker.transport.loop import run
from tests.features.features_harness import FeaturesCluster, features_cluster, wait_for
from tests.hostile_cluster import running_pair


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _stored(cluster: FeaturesCluster, topic: str, queue_id: int) -> list[MessageExt]:
    got = cluster.running_broker.store.get_message("t", topic, queue_id, 0, 256)
    try:
        return list(decode_records(b"".join(got.buffers)))
    finally:
        got.release()


def _timed(topic: str, name: str, value: int, label: str) -> Message:
    return Message(
        topic, f"body-{label}", tags="tagT", keys=f"key-{label}", properties={name: str(value), "label": label}
    )


def test_each_timer_property_delivers_at_its_time_into_its_queue(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("TimerT", queues=2)
            async with Producer("PID-timer", client_config=cluster.client_config()) as producer:
                queue = MessageQueue("TimerT", "broker-f", 1)
                now = _now_ms()
                asked = {
                    "deliver-ms": ("TIMER_DELIVER_MS", now + 1500, now + 1500),
                    "delay-sec": ("TIMER_DELAY_SEC", 1, now + 1000),
                    "delay-ms": ("TIMER_DELAY_MS", 700, now + 700),
                    "start-deliver": ("__STARTDELIVERTIME", now + 1200, now + 1200),
                }
                for label, (name, value, _due) in asked.items():
                    result = await producer.send(_timed("TimerT", name, value, label), queue=queue)
                    assert result.status.name == "SEND_OK"
                assert _stored(cluster, "TimerT", 1) == []  # parked, not yet visible
                assert len(_stored(cluster, TIMER_TOPIC, 0)) == 4
                await wait_for(lambda: len(_stored(cluster, "TimerT", 1)) == 4, 15, "timed messages delivered")
            delivered = {m.properties["label"]: m for m in _stored(cluster, "TimerT", 1)}
            for label, (name, _value, due) in asked.items():
                msg = delivered[label]
                # never early: stored in its topic no sooner than asked (due is a lower bound: the
                # broker's clock read the relative ones a little later than ours did)
                assert msg.store_timestamp >= due, (label, msg.store_timestamp - due)
                assert int(msg.properties[TIMER_DEQUEUE_MS]) >= due
                assert int(msg.properties[TIMER_ENQUEUE_MS]) < due
                assert msg.body == f"body-{label}".encode() and msg.tags == "tagT" and msg.keys == [f"key-{label}"]
                assert msg.properties[name] == str(asked[label][1])
                for gone in (TIMER_OUT_MS, "REAL_TOPIC", "REAL_QID"):
                    assert gone not in msg.properties, (label, gone)
            assert cluster.running_broker.timer.stats()["pending"] == 0

    run(main())


def test_a_time_in_the_past_means_now_and_a_delay_level_wins(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("TimerPast", queues=1)
            async with Producer("PID-timer-past", client_config=cluster.client_config()) as producer:
                await producer.send(_timed("TimerPast", "TIMER_DELIVER_MS", _now_ms() - 60_000, "past"))
                await producer.send(_timed("TimerPast", "TIMER_DELAY_MS", 0, "zero"))
                leveled = _timed("TimerPast", "TIMER_DELAY_SEC", 3600, "level")
                leveled.properties["DELAY"] = "1"
                await producer.send(leveled)
            assert [m.properties["label"] for m in _stored(cluster, "TimerPast", 0)] == ["past", "zero"]
            assert _stored(cluster, TIMER_TOPIC, 0) == []
            assert [m.properties["label"] for m in _stored(cluster, "SCHEDULE_TOPIC_XXXX", 0)] == ["level"]

    run(main())


@pytest.mark.parametrize(
    ("conf", "name", "value", "error", "remark"),
    [
        (
            {"timerMaxDelaySec": "10"},
            "TIMER_DELAY_SEC",
            11,
            MessageIllegal,
            r"max delay 10000ms \(timerMaxDelaySec=10\)",
        ),
        (
            {},
            "TIMER_DELIVER_MS",
            4 * 86_400_000,
            MessageIllegal,
            r"should not be bigger than the max delay 259200000ms",
        ),
        ({}, "TIMER_DELAY_MS", "soon", MessageIllegal, r"TIMER_DELAY_MS property is not a whole number"),
        ({"timerWheelEnable": "false"}, "TIMER_DELAY_SEC", 5, BrokerSystemError, r"timerWheelEnable is false"),
    ],
)
def test_refused_timers_store_nothing(
    tmp_path: Path, conf: dict[str, str], name: str, value: int | str, error: type[Exception], remark: str
) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, **conf) as cluster:
            await cluster.create_topic("TimerBad", queues=1)
            raw = value + _now_ms() if name == "TIMER_DELIVER_MS" and isinstance(value, int) else value
            msg = Message("TimerBad", b"x", properties={name: str(raw)})
            async with Producer("PID-timer-bad", client_config=cluster.client_config(),
                                retry_times_when_send_failed=0) as producer:  # fmt: skip
                with pytest.raises(error, match=remark):
                    await producer.send(msg)
            assert _stored(cluster, "TimerBad", 0) == [] and _stored(cluster, TIMER_TOPIC, 0) == []

    run(main())


def test_a_batch_with_a_delivery_time_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("TimerBatch", queues=1)
            msgs = [Message("TimerBatch", b"a"), _timed("TimerBatch", "TIMER_DELAY_SEC", 5, "in-batch")]
            async with Producer("PID-timer-batch", client_config=cluster.client_config()) as producer:
                with pytest.raises(MessageIllegal, match="batch message 1: timed messages"):
                    await producer.send_batch(msgs)
            assert _stored(cluster, "TimerBatch", 0) == []

    run(main())


def test_pending_timers_survive_a_graceful_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("TimerRestart", queues=1)
            async with Producer("PID-timer-restart", client_config=cluster.client_config()) as producer:
                now = _now_ms()
                for i in range(20):  # half due before the restart, half after
                    await producer.send(_timed("TimerRestart", "TIMER_DELIVER_MS", now + 300 + 150 * i, str(i)))
                await wait_for(lambda: len(_stored(cluster, "TimerRestart", 0)) >= 5, 10, "first deliveries")
                await cluster.restart_broker()
                await wait_for(lambda: len(_stored(cluster, "TimerRestart", 0)) >= 20, 15, "all delivered")
                await asyncio.sleep(0.5)  # nothing more comes
            labels = [m.properties["label"] for m in _stored(cluster, "TimerRestart", 0)]
            assert sorted(labels, key=int) == [str(i) for i in range(20)], labels
            checkpoint = cluster.running_broker.timer.snapshot()
            assert checkpoint == {"offset": 20, "delivered": []}

    run(main())


def test_pending_timers_survive_kill_9_with_sync_flush(tmp_path: Path) -> None:
    """Acknowledged timed messages (SYNC_FLUSH) are all delivered after a kill -9, and those delivered
    long before it (the checkpoint is at most a second behind) are not delivered again."""
    count = 30

    async def send_all(namesrv: str) -> int:
        async with Producer("PID-timer-kill", namesrv) as producer:
            now = _now_ms()
            for i in range(count):
                due = now + (200 if i < 10 else 4000 + 50 * i)  # 10 due at once, 20 after the kill
                await producer.send(_timed("TimerKill", "TIMER_DELIVER_MS", due, str(i)), timeout=10)
        return now

    async def pull_all(namesrv: str, expect: int, timeout: float) -> list[MessageExt]:
        consumer = PullConsumer("CG-timer-kill", namesrv)
        consumer.assign([MessageQueue("TimerKill", "broker-hostile", q) for q in range(4)])
        await consumer.start()
        got: list[MessageExt] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and len(got) < expect:
                got.extend(await consumer.poll(0.5))
            got.extend(await consumer.poll(1.0))  # and nothing more
        finally:
            await consumer.shutdown()
        return got

    with running_pair(tmp_path, flushDiskType="SYNC_FLUSH", autoCreateTopicEnable="true") as procs:
        namesrv = f"127.0.0.1:{procs.namesrv_port}"
        run(send_all(namesrv))
        early = run(pull_all(namesrv, 10, 15))
        assert sorted(int(m.properties["label"]) for m in early) == list(range(10))
        time.sleep(PERSIST_MARGIN)  # the checkpoint records those 10
        procs.kill9("mqbroker")
        procs.spawn("mqbroker", tmp_path / "broker.conf")
        after = run(pull_all(namesrv, count, 30))  # from offset 0 again: everything the topic holds
    labels = sorted(int(m.properties["label"]) for m in after)
    assert labels == list(range(count)), labels


#: More than the timer checkpoint's period (1 s), so deliveries before it are recorded.
PERSIST_MARGIN = 1.5
