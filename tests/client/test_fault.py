"""Latency fault avoidance: the Java latency table and the queue choice, on a hand-driven clock."""

from __future__ import annotations

import pytest

from broker.client.fault import FaultStrategy, LatencyFaultTolerance, not_available_duration
from broker.client.message import MessageQueue
from broker.client.route import TopicPublishInfo, parse_route


@pytest.mark.parametrize(
    ("latency", "duration"),
    [
        (0, 0),
        (49, 0),
        (99, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (2000, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
    ],
)
def test_not_available_duration_table(latency: int, duration: int) -> None:
    assert not_available_duration(latency) == duration


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def two_broker_info() -> TopicPublishInfo:
    route = parse_route(
        {
            "brokerDatas": [{"brokerName": n, "cluster": "C", "brokerAddrs": {"0": f"{n}:1"}} for n in ("a", "b")],
            "queueDatas": [{"brokerName": n, "perm": 6, "readQueueNums": 2, "writeQueueNums": 2} for n in ("a", "b")],
        }
    )
    return TopicPublishInfo.from_route("T", route)


def test_failed_broker_is_avoided_until_its_isolation_expires() -> None:
    clock = Clock()
    strategy = FaultStrategy(True, now=clock)
    info = two_broker_info()
    strategy.update("a", 10, isolation=True)  # a failure: 30 s of isolation -> 600 s table entry
    assert all(strategy.select(info).broker_name == "b" for _ in range(10))
    clock.ms += 600_001
    assert {strategy.select(info).broker_name for _ in range(10)} == {"a", "b"}


def test_slow_broker_is_sidelined_for_the_table_duration() -> None:
    clock = Clock()
    strategy = FaultStrategy(True, now=clock)
    info = two_broker_info()
    strategy.update("b", 600, isolation=False)
    assert all(strategy.select(info).broker_name == "a" for _ in range(10))
    clock.ms += 30_001
    assert "b" in {strategy.select(info).broker_name for _ in range(10)}


def test_retry_prefers_another_available_broker() -> None:
    strategy = FaultStrategy(True, now=Clock())
    info = two_broker_info()
    assert all(strategy.select(info, last_broker_name="a").broker_name == "b" for _ in range(10))


def test_all_brokers_sidelined_still_returns_a_queue() -> None:
    clock = Clock()
    strategy = FaultStrategy(True, now=clock)
    info = two_broker_info()
    strategy.update("a", 20000, isolation=False)
    strategy.update("b", 1000, isolation=False)
    mq = strategy.select(info)
    assert mq.broker_name == "b"  # the less bad one
    assert mq in info.queues


def test_disabled_strategy_ignores_failures() -> None:
    strategy = FaultStrategy(False, now=Clock())
    info = two_broker_info()
    strategy.update("a", 20000, isolation=True)
    assert {strategy.select(info).broker_name for _ in range(10)} == {"a", "b"}


def test_pick_one_at_least_rotates_over_the_better_half() -> None:
    clock = Clock()
    tol = LatencyFaultTolerance(now=clock)
    for name, latency in [("a", 100), ("b", 200), ("c", 300), ("d", 400)]:
        tol.update(name, latency, 60_000)
    picks = [tol.pick_one_at_least() for _ in range(4)]
    assert set(picks) == {"a", "b"}
    assert MessageQueue("T", "a", 0) < MessageQueue("T", "b", 0)
