"""Timed messages as pure rules: which delivery time a message asks for, when it is refused, how it
is parked and released (broker.server.timer_message), and the timer's delivered-offset ranges."""

from __future__ import annotations

import pytest

from broker.protocol.message import MessageExt
from broker.server.errors import RequestError
from broker.server.timer import DeliveredRanges
from broker.server.timer_message import (
    TIMER_TOPIC,
    may_be_timed,
    park_for_timer,
    release_from_timer,
    requested_delivery,
    timer_delivery,
)
from broker.store.results import MessageToStore

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("props", "due"),
    [
        ({}, None),
        ({"TIMER_DELAY_SEC": "3"}, NOW + 3000),
        ({"TIMER_DELAY_MS": "250"}, NOW + 250),
        ({"TIMER_DELIVER_MS": str(NOW + 42)}, NOW + 42),
        ({"__STARTDELIVERTIME": str(NOW + 7)}, NOW + 7),
        ({"TIMER_DELAY_SEC": "1", "TIMER_DELIVER_MS": str(NOW + 99_000)}, NOW + 1000),  # RocketMQ's order
        ({"TIMER_DELAY_MS": " 5 "}, NOW + 5),
    ],
)
def test_requested_delivery(props: dict[str, str], due: int | None) -> None:
    assert requested_delivery(props, NOW) == due


@pytest.mark.parametrize(
    ("props", "due"),
    [
        ({"TIMER_DELIVER_MS": str(NOW - 1)}, None),  # the past means now
        ({"TIMER_DELIVER_MS": str(NOW)}, None),
        ({"TIMER_DELAY_MS": "-5"}, None),
        ({"TIMER_DELAY_MS": "1"}, NOW + 1),
        ({"TIMER_DELAY_SEC": "60", "DELAY": "3"}, None),  # a delay level wins
        ({"TIMER_DELAY_SEC": "60", "DELAY": "0"}, NOW + 60_000),
        ({"TIMER_DELAY_SEC": "100"}, NOW + 100_000),  # exactly the maximum
    ],
)
def test_timer_delivery_accepts(props: dict[str, str], due: int | None) -> None:
    assert timer_delivery(props, NOW, enabled=True, max_delay_sec=100) == due


@pytest.mark.parametrize(
    ("props", "enabled", "code", "remark"),
    [
        ({"TIMER_DELAY_SEC": "101"}, True, 13, "max delay 100000ms"),
        ({"TIMER_DELAY_MS": "1e3"}, True, 13, "TIMER_DELAY_MS property is not a whole number"),
        ({"TIMER_DELIVER_MS": ""}, True, 13, "not a whole number"),
        ({"TIMER_DELAY_SEC": "5"}, False, 1, "timerWheelEnable is false"),
    ],
)
def test_timer_delivery_refuses(props: dict[str, str], enabled: bool, code: int, remark: str) -> None:
    with pytest.raises(RequestError) as caught:
        timer_delivery(props, NOW, enabled=enabled, max_delay_sec=100)
    assert caught.value.code == code and remark in caught.value.remark


@pytest.mark.parametrize(
    ("text", "maybe"),
    [("", False), ("KEYS\x01a\x02", False), ("TIMER_DELAY_SEC\x015\x02", True), ("__STARTDELIVERTIME\x011\x02", True)],
)
def test_may_be_timed(text: str, maybe: bool) -> None:
    assert may_be_timed(text) is maybe


def test_park_then_release_restores_target_and_user_properties() -> None:
    msg = MessageToStore(topic="T", queue_id=3, body=b"b", properties_bytes=b"x", dispatch_keys=("a", None, None))
    props = {"TIMER_DELAY_SEC": "5", "color": "blue"}
    park_for_timer(msg, props, NOW + 5000)
    assert (msg.topic, msg.queue_id, msg.properties_bytes, msg.dispatch_keys) == (TIMER_TOPIC, 0, None, None)
    assert msg.properties == {
        "TIMER_DELAY_SEC": "5", "color": "blue", "TIMER_OUT_MS": str(NOW + 5000), "REAL_TOPIC": "T", "REAL_QID": "3"
    }  # fmt: skip
    parked = MessageExt(topic=TIMER_TOPIC, body=b"b", properties=msg.properties, store_timestamp=NOW, flag=9)
    released = release_from_timer(parked, NOW + 5001)
    assert (released.topic, released.queue_id, released.flag, released.body) == ("T", 3, 9, b"b")
    assert released.properties == {
        "TIMER_DELAY_SEC": "5", "color": "blue", "TIMER_ENQUEUE_MS": str(NOW), "TIMER_DEQUEUE_MS": str(NOW + 5001)
    }  # fmt: skip


@pytest.mark.parametrize(
    ("adds", "ranges"),
    [
        ([], []),
        ([5], [(5, 6)]),
        ([5, 6, 7], [(5, 8)]),
        ([7, 5, 6], [(5, 8)]),  # the middle one joins both neighbours
        ([1, 3, 5], [(1, 2), (3, 4), (5, 6)]),
        ([3, 3, 3], [(3, 4)]),
        ([10, 2, 11, 1, 3], [(1, 4), (10, 12)]),
    ],
)
def test_delivered_ranges_merge(adds: list[int], ranges: list[tuple[int, int]]) -> None:
    delivered = DeliveredRanges()
    for offset in adds:
        delivered.add(offset)
    assert delivered.ranges == ranges
    assert delivered.count() == len(set(adds))
    assert all(offset in delivered for offset in adds)
    assert not any(offset in delivered for offset in range(20) if offset not in adds)


@pytest.mark.parametrize(
    ("watermark", "ranges"),
    [(0, [(2, 4), (6, 9)]), (3, [(3, 4), (6, 9)]), (5, [(6, 9)]), (8, [(8, 9)]), (9, [])],
)
def test_delivered_ranges_forget_below_the_watermark(watermark: int, ranges: list[tuple[int, int]]) -> None:
    delivered = DeliveredRanges([(2, 4), (6, 9)])
    delivered.advance(watermark)
    assert delivered.ranges == ranges
