"""Queries and offset reset over real TCP: QUERY_MESSAGE by key and time range and by uniq key
returns only records that really carry the key (the index matches hashes), the message id lookup
returns the message, and resetting a group's offsets by time (broker request 222,
`mqadmin resetOffsetByTime`) replays from the right offset in running push and pull consumers."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import pytest

from broker.cli.mqadmin import main as mqadmin
from broker.cli.mqadmin import parse_reset_timestamp
from broker.client import Admin, ConsumeStatus, Message, MessageExt, Producer, PullConsumer, PushConsumer
from broker.client.errors import RocketError
from broker.protocol.javahash import java_string_hash
from broker.transport.loop import run
from tests.features.features_harness import features_cluster, wait_for


def test_query_by_key_time_range_and_uniq_key_returns_exact_matches(tmp_path: Path) -> None:
    # "Aa" and "BB" have the same Java hash, so "QT#Aa" and "QT#BB" share an IndexFile slot and hash.
    assert java_string_hash("QT#Aa") == java_string_hash("QT#BB")

    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("QT", queues=2)
            await cluster.create_topic("QOther", queues=1)
            async with Producer("PG-q", client_config=cluster.client_config()) as producer:
                early = await producer.send(Message("QT", "early", keys=["order-1"]))
                await asyncio.sleep(0.05)
                middle = int(time.time() * 1000)
                await asyncio.sleep(0.05)
                late = await producer.send(Message("QT", "late", keys=["order-1", "x"]))
                aa = await producer.send(Message("QT", "aa", keys="Aa"))
                bb = await producer.send(Message("QT", "bb", keys="BB"))
                await producer.send(Message("QOther", "other-topic", keys="order-1"))
            addr = cluster.running_broker.addr
            async with Admin(cluster.namesrv_addr) as admin:
                api = admin.instance.api  # raw requests: no client-side filtering
                now = int(time.time() * 1000) + 1000
                found = await api.query_message(addr, "QT", "order-1", 32, 0, now)
                assert sorted(m.body for m in found) == [b"early", b"late"]
                found = await api.query_message(addr, "QT", "order-1", 32, 0, middle)
                assert [m.body for m in found] == [b"early"]  # the time range excludes the late one
                assert [m.body for m in await api.query_message(addr, "QT", "BB", 32, 0, now)] == [b"bb"]
                assert [m.body for m in await api.query_message(addr, "QT", "Aa", 32, 0, now)] == [b"aa"]
                assert await api.query_message(addr, "QT", "missing", 32, 0, now) == []
                by_uniq = await api.query_message(addr, "QT", bb.msg_id, 1, 0, now, unique=True)
                assert [m.msg_id for m in by_uniq] == [bb.msg_id]
                assert await api.query_message(addr, "QOther", aa.msg_id, 1, 0, now, unique=True) == []

                # The admin calls (mqadmin queryMsgByKey / queryMsgByUniqueKey / queryMsgById).
                assert [m.body for m in await admin.query_message_by_key("QT", "x")] == [b"late"]
                assert [m.body for m in await admin.query_message_by_uniq_key("QT", early.msg_id)] == [b"early"]
                viewed = await admin.view_message(late.offset_msg_id)
                assert viewed.body == b"late" and viewed.msg_id == late.msg_id and viewed.topic == "QT"
                assert viewed.keys == ["order-1", "x"] and viewed.queue_offset == late.queue_offset
                missing = late.offset_msg_id[:-16] + f"{10**9:016X}"
                with pytest.raises(RocketError, match="can not find message"):
                    await admin.view_message(missing)

    run(main())


def test_parse_reset_timestamp() -> None:
    assert parse_reset_timestamp("now", now_ms=42) == 42
    assert parse_reset_timestamp("1700000000123") == 1700000000123
    expected = int(datetime(2024, 3, 5, 6, 7, 8, 9000).timestamp() * 1000)
    assert parse_reset_timestamp("2024-03-05#06:07:08:009") == expected
    with pytest.raises(ValueError, match="yyyy-MM-dd#HH:mm:ss:SSS"):
        parse_reset_timestamp("yesterday")


def test_reset_offset_by_time_replays_from_the_right_offset(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("ResetT", queues=2)
            received: list[str] = []

            def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                received.extend(m.body.decode() for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            push = PushConsumer(
                "CG-reset", client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
            )
            push.subscribe("ResetT", "*")
            push.register_listener(listener)
            await push.start()
            pull = PullConsumer(
                "CG-reset-pull", client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
            )
            pull.subscribe("ResetT", "*")
            await pull.start()
            polled: list[str] = []
            try:
                async with Producer("PG-reset", client_config=cluster.client_config()) as producer:
                    for i in range(6):
                        await producer.send(Message("ResetT", f"a{i}"))
                    await asyncio.sleep(0.05)
                    cut = int(time.time() * 1000)
                    await asyncio.sleep(0.05)
                    for i in range(6):
                        await producer.send(Message("ResetT", f"b{i}"))
                await wait_for(lambda: len(received) == 12, 15, "first consumption")
                while len(polled) < 12:
                    batch = await pull.poll(5)
                    assert batch, polled
                    polled.extend(m.body.decode() for m in batch)
                received.clear()
                polled.clear()

                code = await asyncio.to_thread(
                    mqadmin,
                    ["resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", "CG-reset", "-t", "ResetT", "-s", str(cut)],
                )
                assert code == 0
                await wait_for(lambda: len(received) >= 6, 15, "replay after the reset")
                await asyncio.sleep(0.5)
                assert sorted(received) == [f"b{i}" for i in range(6)]

                async with Admin(cluster.namesrv_addr) as admin:
                    moved = await admin.reset_offset_by_time("CG-reset-pull", "ResetT", cut)
                assert sum(moved.values()) == 6  # every "a" message is before the cut
                while len(polled) < 6:
                    batch = await pull.poll(5)
                    assert batch, polled
                    polled.extend(m.body.decode() for m in batch)
                assert sorted(polled) == [f"b{i}" for i in range(6)]
                # Back to the start: everything again.
                async with Admin(cluster.namesrv_addr) as admin:
                    moved = await admin.reset_offset_by_time("CG-reset", "ResetT", 0)
                assert set(moved.values()) == {0}
                await wait_for(lambda: len(received) >= 18, 15, "replay from the start")
            finally:
                await pull.shutdown()
                await push.shutdown()

    run(main())
