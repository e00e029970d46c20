"""Offsets JSON layout, spec resolution, the per-trigger cap, data-loss gaps and range planning (pure)."""

from __future__ import annotations

import json

import pytest

from broker.client.message import MessageQueue
from broker.spark.offsets import (
    EARLIEST,
    LATEST,
    Gap,
    cap_offsets,
    find_gaps,
    offsets_of,
    parse_queue_key,
    queues_of,
    resolve_spec,
    sort_offsets,
)
from broker.spark.planning import QueueRange, pack_ranges, plan_ranges

A0, A1, A10, B0 = (
    MessageQueue("T", "a", 0),
    MessageQueue("T", "a", 1),
    MessageQueue("T", "a", 10),
    MessageQueue("T", "b", 0),
)
U0 = MessageQueue("U", "a", 0)


def test_queue_keys_round_trip_and_broker_names_may_contain_slashes() -> None:
    assert parse_queue_key("broker-a/3") == ("broker-a", 3)
    assert parse_queue_key("dc1/broker-a/12") == ("dc1/broker-a", 12)
    for bad in ("a", "a/", "/1", "a/-1", "a/x"):
        with pytest.raises(ValueError):
            parse_queue_key(bad)


def test_sorted_layout_serialises_equal_positions_to_equal_json() -> None:
    # Spark compares offsets as JSON strings: the order must not depend on how the dict was built.
    one = offsets_of({B0: 1, A10: 3, A1: 2, U0: 0, A0: 9})
    two = offsets_of({U0: 0, A0: 9, A1: 2, A10: 3, B0: 1})
    assert json.dumps(one) == json.dumps(two)
    assert list(one) == ["T", "U"]
    assert list(one["T"]) == ["a/0", "a/1", "a/10", "b/0"]  # numeric queue order, not string order
    assert queues_of(json.loads(json.dumps(one))) == {A0: 9, A1: 2, A10: 3, B0: 1, U0: 0}
    assert sort_offsets({"T": {"b/0": 1, "a/0": 2}}) == {"T": {"a/0": 2, "b/0": 1}}


LOWS = {A0: 5, A1: 0, B0: 2}
HIGHS = {A0: 50, A1: 10, B0: 2}


@pytest.mark.parametrize(
    ("spec", "unlisted", "expected"),
    [
        ("earliest", EARLIEST, LOWS),
        ("latest", EARLIEST, HIGHS),
        ({"T": {"a/0": 7, "a/1": LATEST}}, EARLIEST, {A0: 7, A1: 10, B0: 2}),
        ({"T": {"a/0": EARLIEST}}, LATEST, {A0: 5, A1: 10, B0: 2}),
        ({}, LATEST, HIGHS),
    ],
)
def test_resolve_spec(spec: object, unlisted: int, expected: dict[MessageQueue, int]) -> None:
    assert resolve_spec(spec, LOWS, HIGHS, unlisted=unlisted, name="startingOffsets") == expected  # type: ignore[arg-type]


def test_resolve_spec_rejects_queues_the_topic_does_not_have() -> None:
    with pytest.raises(ValueError, match=r"startingOffsets names queues that do not exist: T@a:7"):
        resolve_spec({"T": {"a/7": 1}}, LOWS, HIGHS, unlisted=EARLIEST, name="startingOffsets")


@pytest.mark.parametrize(
    ("start", "latest", "cap", "expected"),
    [
        # Everything fits: latest as is.
        ({"T": {"a/0": 0, "a/1": 0}}, {"T": {"a/0": 3, "a/1": 4}}, 10, {"T": {"a/0": 3, "a/1": 4}}),
        # Proportional: 30 and 10 pending, cap 8 -> 6 and 2.
        ({"T": {"a/0": 0, "a/1": 0}}, {"T": {"a/0": 30, "a/1": 10}}, 8, {"T": {"a/0": 6, "a/1": 2}}),
        # Largest remainder: 3 equal backlogs, cap 4 -> 2,1,1 (ties go to the first queue in order).
        (
            {"T": {"a/0": 0, "a/1": 0, "b/0": 0}},
            {"T": {"a/0": 9, "a/1": 9, "b/0": 9}},
            4,
            {"T": {"a/0": 2, "a/1": 1, "b/0": 1}},
        ),
        # A tiny cap still advances: 1 row to the queue with the biggest share.
        ({"T": {"a/0": 10, "a/1": 0}}, {"T": {"a/0": 11, "a/1": 100}}, 1, {"T": {"a/0": 10, "a/1": 1}}),
        # A queue new in latest (absent from start) has no backlog under the cap.
        ({"T": {"a/0": 0}}, {"T": {"a/0": 20, "b/0": 5}}, 4, {"T": {"a/0": 4, "b/0": 5}}),
    ],
)
def test_cap_offsets(start: dict, latest: dict, cap: int, expected: dict) -> None:  # type: ignore[type-arg]
    end = cap_offsets(start, latest, cap)
    assert end == expected
    read = sum(end[t][k] - start.get(t, {}).get(k, latest[t][k]) for t in end for k in end[t])
    assert read <= cap


def test_cap_offsets_never_exceeds_the_cap_and_drains_everything() -> None:
    start = {"T": {f"a/{i}": 0 for i in range(7)}}
    latest = {"T": {f"a/{i}": (i * 37) % 23 + 1 for i in range(7)}}
    total = sum(latest["T"].values())
    batches = []
    while start != latest:
        end = cap_offsets(start, latest, 10)
        batches.append(sum(end["T"][k] - start["T"][k] for k in end["T"]))
        start = end
    assert sum(batches) == total
    assert all(0 < b <= 10 for b in batches)
    assert batches[:-1] == [10] * (len(batches) - 1)


def test_find_gaps() -> None:
    gaps = find_gaps({A0: 3, A1: 10, B0: 0}, {A0: 5, A1: 0, B0: 0})
    assert gaps == [Gap(A0, 3, 5)]
    assert gaps[0].describe() == "T@a:0: offsets 3..4 (2 messages)"


@pytest.mark.parametrize(
    ("start", "end", "max_records", "expected"),
    [
        ({A0: 0, A1: 5}, {A0: 3, A1: 5}, None, [QueueRange("T", "a", 0, 0, 3)]),
        (
            {A0: 0},
            {A0: 10},
            4,
            [QueueRange("T", "a", 0, 0, 4), QueueRange("T", "a", 0, 4, 8), QueueRange("T", "a", 0, 8, 10)],
        ),
        (
            {A0: 2, B0: 0},
            {B0: 1, A0: 4},
            1,
            [QueueRange("T", "a", 0, 2, 3), QueueRange("T", "a", 0, 3, 4), QueueRange("T", "b", 0, 0, 1)],
        ),
        ({A0: 5}, {A0: 3}, None, []),  # nothing to read when start is past end
        ({}, {A0: 3}, None, []),  # the caller decides where queues without a start begin
    ],
)
def test_plan_ranges(start: dict, end: dict, max_records: int | None, expected: list[QueueRange]) -> None:  # type: ignore[type-arg]
    assert plan_ranges(start, end, max_records) == expected


def _r(queue: int, size: int) -> QueueRange:
    return QueueRange("T", "a", queue, 100, 100 + size)


def test_pack_ranges_one_each_unless_capped() -> None:
    ranges = [_r(q, 10) for q in range(5)]
    assert pack_ranges(ranges) == [(r,) for r in ranges]
    assert pack_ranges(ranges, 5) == pack_ranges(ranges, 8) == [(r,) for r in ranges]
    assert pack_ranges([], 2) == []
    with pytest.raises(ValueError, match="max_partitions"):
        pack_ranges(ranges, 0)


def test_pack_ranges_balances_offsets_and_keeps_queue_order() -> None:
    ranges = [_r(0, 90), _r(1, 10), _r(2, 50), _r(3, 40), _r(4, 5), _r(5, 5)]
    packed = pack_ranges(ranges, 2)
    assert packed == [(_r(0, 90), _r(1, 10)), (_r(2, 50), _r(3, 40), _r(4, 5), _r(5, 5))]
    assert sorted(r for p in packed for r in p) == ranges  # every range once
    assert [sum(r.size for r in p) for p in packed] == [100, 100]
    assert pack_ranges(list(reversed(ranges)), 2) == packed  # the same partitions whatever the input order
    assert pack_ranges(ranges, 1) == [tuple(ranges)]
