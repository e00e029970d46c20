"""The SDK's SimpleConsumer over POP, against a real NameServer and broker on loopback: receive, ack, a message
left unacked coming back, a changed invisible duration, tag filters; and the pure parts of its reply parsing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.client import Message, Producer
from broker.client.errors import IllegalStateError
from broker.client.message import MessageExt
from broker.client.pop import POP_CK, parse_offset_info, receipt
from broker.client.simple_consumer import INIT_MODE_MIN, SimpleConsumer
from broker.transport.loop import run
from tests.client.client_harness import live_cluster


async def _drain(consumer: SimpleConsumer, want: int, invisible: float = 30.0, rounds: int = 40) -> list[MessageExt]:
    got: list[MessageExt] = []
    for _ in range(rounds):
        got += await consumer.receive(32, invisible)
        if len(got) >= want:
            break
    return got


def test_receive_ack_and_nothing_comes_back(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SimpleT", queues=4)
            async with Producer("PG-simple", cluster.namesrv_addr) as producer:
                sent = [
                    await producer.send(
                        Message("SimpleT", f"m{i}", tags="a", keys=f"k{i}", properties={"color": f"c{i}"})
                    )
                    for i in range(10)
                ]
            consumer = SimpleConsumer("CG-simple", cluster.namesrv_addr, {"SimpleT": "*"}, await_duration=1.0)
            async with consumer:
                got = await _drain(consumer, 10, invisible=3.0)
                assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(10))
                assert {m.msg_id for m in got} == {r.msg_id for r in sent}
                for m in got:
                    assert m.topic == "SimpleT" and m.tags == "a" and m.properties["color"] == f"c{m.body[1:].decode()}"
                    assert m.keys == [f"k{m.body[1:].decode()}"]
                    await consumer.ack(m)
                await asyncio.sleep(4.5)  # past the invisible time: acked messages must not come back
                assert await _drain(consumer, 1, rounds=3) == []

    run(main())


def test_unacked_message_comes_back_and_can_then_be_acked(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SimpleRetry", queues=2)
            async with Producer("PG-retry", cluster.namesrv_addr) as producer:
                sent = await producer.send(Message("SimpleRetry", b"again", keys="once"))
            consumer = SimpleConsumer("CG-retry", cluster.namesrv_addr, {"SimpleRetry": "*"}, await_duration=1.0)
            async with consumer:
                first = await _drain(consumer, 1, invisible=2.0)
                assert [m.body for m in first] == [b"again"]
                deadline = time.monotonic() + 30
                again: list[MessageExt] = []
                while not again and time.monotonic() < deadline:
                    again = await consumer.receive(32, 30.0)
                assert [m.body for m in again] == [b"again"], "an unacked message must come back"
                back = again[0]
                assert back.msg_id == sent.msg_id and back.topic == "SimpleRetry"
                assert back.reconsume_times == 1
                await consumer.ack(back)
                assert await _drain(consumer, 1, rounds=3) == []

    run(main())


def test_change_invisible_duration_keeps_a_message_away(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SimpleChange", queues=1)
            async with Producer("PG-change", cluster.namesrv_addr) as producer:
                for i in range(3):
                    await producer.send(Message("SimpleChange", f"c{i}"))
            consumer = SimpleConsumer("CG-change", cluster.namesrv_addr, {"SimpleChange": "*"}, await_duration=1.0)
            async with consumer:
                got = await _drain(consumer, 3, invisible=2.0)
                assert len(got) == 3
                old_handle = got[1].properties[POP_CK]
                await consumer.change_invisible_duration(got[1], 60.0)
                assert got[1].properties[POP_CK] != old_handle
                await consumer.ack(got[0])
                await consumer.ack(got[2])
                await asyncio.sleep(4.0)  # past the first invisible time
                assert await _drain(consumer, 1, rounds=3) == [], "the changed message must stay invisible"
                await consumer.ack(got[1])  # the new handle (a message that was not first in its batch) acks

    run(main())


def test_tag_filter_and_init_mode_min(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("SimpleTags", queues=2)
            async with Producer("PG-tags", cluster.namesrv_addr) as producer:
                for i in range(8):
                    await producer.send(Message("SimpleTags", f"t{i}", tags="even" if i % 2 == 0 else "odd"))
            consumer = SimpleConsumer(
                "CG-tags", cluster.namesrv_addr, {"SimpleTags": "even"}, await_duration=1.0, init_mode=INIT_MODE_MIN
            )
            async with consumer:
                got = await _drain(consumer, 4, rounds=10)
                assert sorted(m.body for m in got) == [b"t0", b"t2", b"t4", b"t6"]
                for m in got:
                    await consumer.ack(m)

    run(main())


def test_bad_arguments_and_states_are_refused_clearly() -> None:
    consumer = SimpleConsumer("CG", "127.0.0.1:1", {"T": "*"})
    with pytest.raises(IllegalStateError):
        run(consumer.receive())
    with pytest.raises(ValueError, match="consumer group"):
        SimpleConsumer("", "127.0.0.1:1")
    consumer._started = True
    with pytest.raises(ValueError, match="max_messages"):
        run(consumer.receive(33))
    with pytest.raises(ValueError, match="invisible_duration"):
        run(consumer.receive(1, 0))


@pytest.mark.parametrize(
    ("text", "table"),
    [
        (None, {}),
        ("", {}),
        ("0 3 17", {"0@3": [17]}),
        ("0 0 5;1 0 0", {"0@0": [5], "1@0": [0]}),
        ("0 1 4,5,9", {"0@1": [4, 5, 9]}),
    ],
)
def test_offset_info_parses(text: str | None, table: dict[str, list[int]]) -> None:
    assert parse_offset_info(text) == table


@pytest.mark.parametrize("text", ["0 1", "0 x 4", "a 1 2", "0 1 2 3", "0 1 4,z"])
def test_malformed_offset_info_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="offset info entry"):
        parse_offset_info(text)


def test_receipt_needs_a_valid_handle() -> None:
    msg = MessageExt(topic="T", body=b"")
    with pytest.raises(ValueError, match="empty"):
        receipt(msg, "G")
    msg.properties[POP_CK] = "1 2 3"
    with pytest.raises(ValueError, match="fields"):
        receipt(msg, "G")
    msg.properties[POP_CK] = "5 1000 60000 0 1 b0 2 7"
    r = receipt(msg, "G")
    assert (r.topic, r.queue_id, r.offset) == ("%RETRY%G_T", 2, 7)
