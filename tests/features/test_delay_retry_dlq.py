"""Delay levels, retries and dead letters end to end over real TCP: a level-3 message arrives 10 s
(+/- 1 s) after sending even across a broker restart while it waits; a message that always fails goes
through the retry levels (shortened here) into %DLQ%<group> with its history; the subscription
group's retryMaxTimes and consumeEnable are honoured; the DLQ is write-only."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson

from broker.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from broker.protocol.bodies import fastjson_loads
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import decode_records
from broker.protocol.properties import Prop
from broker.server.topics import PERM_WRITE
from broker.transport.client import connect
from broker.transport.loop import run
from tests.features.features_harness import features_cluster, wait_for

FAST_LEVELS = "1s 1s 1s 1s 1s 1s"


def _dead_letters(store, group: str) -> list[MessageExt]:  # type: ignore[no-untyped-def]
    got = store.get_message("t", f"%DLQ%{group}", 0, 0, 32)
    try:
        return list(decode_records(b"".join(got.buffers)))
    finally:
        got.release()


def test_level_3_arrives_after_10_seconds_across_a_broker_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("DelayT", queues=2)
            arrived: list[tuple[float, MessageExt]] = []

            def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                arrived.extend((time.time(), m) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer(
                "CG-delay", client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
            )
            consumer.subscribe("DelayT", "*")
            consumer.register_listener(listener)
            await consumer.start()
            try:
                async with Producer("PG-delay", client_config=cluster.client_config()) as producer:
                    sent_at = time.time()
                    sent = await producer.send(Message("DelayT", "later", delay_time_level=3))
                    await producer.send(Message("DelayT", "now"))
                await wait_for(lambda: len(arrived) == 1, 5, "the undelayed message")
                await asyncio.sleep(2)
                await cluster.restart_broker()  # the delayed message waits in SCHEDULE_TOPIC_XXXX meanwhile
                await wait_for(lambda: len(arrived) == 2, 15, "the delayed message")
            finally:
                await consumer.shutdown()
            at, msg = arrived[1]
            assert msg.body == b"later" and msg.msg_id == sent.msg_id and msg.topic == "DelayT"
            assert 9.0 <= at - sent_at <= 11.0, at - sent_at
            assert Prop.REAL_TOPIC not in msg.properties
        # the broker's shutdown recorded the schedule service's progress: level 3 delivered one message
        delay_offsets = fastjson_loads((tmp_path / "store" / "config" / "delayOffset.json").read_bytes())
        assert {int(k): v for k, v in delay_offsets["offsetTable"].items()} == {3: 1}

    run(main())


def test_a_message_that_always_fails_lands_in_the_dlq_with_its_history(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, messageDelayLevel=FAST_LEVELS) as cluster:
            await cluster.create_topic("FailT", queues=1)
            attempts: list[MessageExt] = []

            def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                attempts.extend(msgs)
                return ConsumeStatus.RECONSUME_LATER

            consumer = PushConsumer(
                "CG-fail",
                client_config=cluster.client_config(),
                max_reconsume_times=3,
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            )
            consumer.subscribe("FailT", "*")
            consumer.register_listener(listener)
            await consumer.start()
            store = cluster.running_broker.store
            try:
                async with Producer("PG-fail", client_config=cluster.client_config()) as producer:
                    sent = await producer.send(Message("FailT", "doomed", tags="TagA", keys="k-doomed"))
                await wait_for(lambda: store.get_max_offset_in_queue("%DLQ%CG-fail", 0) == 1, 20, "the DLQ")
            finally:
                await consumer.shutdown()
            assert [m.reconsume_times for m in attempts] == [0, 1, 2, 3]
            assert all(m.topic == "FailT" and m.msg_id == sent.msg_id for m in attempts)
            (dead,) = _dead_letters(store, "CG-fail")
            assert dead.body == b"doomed" and dead.reconsume_times == 4
            assert dead.properties[Prop.ORIGIN_MESSAGE_ID] == sent.msg_id
            assert dead.properties[Prop.RETRY_TOPIC] == "FailT"
            assert dead.tags == "TagA" and dead.keys == ["k-doomed"]
            dlq = cluster.running_broker.topics.get("%DLQ%CG-fail")
            assert dlq is not None and dlq.perm == PERM_WRITE and dlq.read_queue_nums == 1

    run(main())


def test_subscription_group_config_is_honoured(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, messageDelayLevel=FAST_LEVELS) as cluster:
            await cluster.create_topic("GroupT", queues=1)
            async with Producer("PG-group", client_config=cluster.client_config()) as producer:
                sent = await producer.send(Message("GroupT", "x"))
            conn = await connect(cluster.running_broker.addr)
            try:

                async def request(
                    code: int, ext: dict[str, str] | None = None, body: bytes = b"", version: int = 479
                ) -> RemotingCommand:
                    cmd = RemotingCommand(code=code, ext_fields=ext or {}, body=body, version=version)
                    return await conn.invoke(cmd, 5.0)

                cfg = {"groupName": "CG-cfg", "retryMaxTimes": 1, "retryQueueNums": 1, "consumeEnable": True}
                resp = await request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(cfg))
                assert resp.code == ResponseCode.SUCCESS
                phy = int(sent.offset_msg_id[-16:], 16)
                # An old client (no maxReconsumeTimes): the group's retryMaxTimes decides.
                back = {"offset": str(phy), "group": "CG-cfg", "delayLevel": "0", "originMsgId": sent.msg_id}
                assert (await request(RequestCode.CONSUMER_SEND_MSG_BACK, back, version=100)).code == 0
                store = cluster.running_broker.store
                await wait_for(lambda: store.get_max_offset_in_queue("%RETRY%CG-cfg", 0) == 1, 5, "first retry")
                retry_phy = store.get_commit_log_offset_in_queue("%RETRY%CG-cfg", 0, 0)
                back["offset"] = str(retry_phy)  # the retry copy has reconsumeTimes 1 = retryMaxTimes
                assert (await request(RequestCode.CONSUMER_SEND_MSG_BACK, back, version=100)).code == 0
                await wait_for(lambda: store.get_max_offset_in_queue("%DLQ%CG-cfg", 0) == 1, 5, "the DLQ")
                assert [m.body for m in _dead_letters(store, "CG-cfg")] == [b"x"]

                cfg["consumeEnable"] = False
                await request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(cfg))
                pull = {
                    "consumerGroup": "CG-cfg",
                    "topic": "GroupT",
                    "queueId": "0",
                    "queueOffset": "0",
                    "maxMsgNums": "8",
                    "sysFlag": str(0x4),
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "0",
                    "subscription": "*",
                    "subVersion": "0",
                }
                resp = await request(RequestCode.PULL_MESSAGE, pull)
                assert resp.code == ResponseCode.NO_PERMISSION and "CG-cfg" in (resp.remark or "")
                # The DLQ is write-only: consumers cannot pull it.
                pull.update(topic="%DLQ%CG-cfg", consumerGroup="CG-reader")
                resp = await request(RequestCode.PULL_MESSAGE, pull)
                assert resp.code == ResponseCode.NO_PERMISSION
            finally:
                conn.close()

    run(main())
