"""The send counting of broker/metrics/broker_meters.py: the send processor appends each stored message to
`BrokerMeters.puts`, and `fold` counts a read's puts into the message size cells, at once when they are
one normal topic's in one size bucket. These hold `fold` equal to counting each put by itself
(`count_put`), for every shape the fast path must take or refuse."""

from __future__ import annotations

import random

import pytest

from broker.metrics.broker_meters import SIZE_BUCKETS, BrokerMeters, InKey

TOPIC = "TopicTest"
BIG = 4096 + 1  # the third bucket
READS: dict[str, list[tuple[InKey, int]]] = {
    "one topic, one bucket": [(TOPIC, 1200 + i) for i in range(64)],
    "one topic, first bucket to its bound": [(TOPIC, size) for size in (1, 500, 1024)],
    "one topic, two buckets": [(TOPIC, 1024), (TOPIC, 1025)],
    "two topics": [(TOPIC, 1200), ("Other", 1200), (TOPIC, 1300)],
    "a typed message among normal ones": [(TOPIC, 1200), ((TOPIC, "delay"), 1200), (TOPIC, 1200)],
    "typed only": [((TOPIC, "fifo"), 300), ((TOPIC, "fifo"), 300)],
    "past the last bound": [(TOPIC, 5 * 1024 * 1024), (TOPIC, 5 * 1024 * 1024 + 7)],
    "one put": [(TOPIC, BIG)],
}


def _plainly(reads: list[list[tuple[InKey, int]]]) -> BrokerMeters:
    meters = BrokerMeters()
    for puts in reads:
        for key, size in puts:
            meters.count_put(key, size)
    return meters


def _folded(reads: list[list[tuple[InKey, int]]]) -> BrokerMeters:
    meters = BrokerMeters()
    for puts in reads:
        meters.puts.extend(puts)
        meters.fold()
        assert meters.puts == []
    return meters


@pytest.mark.parametrize("name", list(READS))
def test_fold_counts_what_counting_each_put_counts(name: str) -> None:
    reads = [READS[name], READS[name]]
    folded, plain = _folded(reads), _plainly(reads)
    assert folded.in_cells == plain.in_cells
    assert folded.normal_cells == plain.normal_cells
    assert sum(SIZE_BUCKETS.count(cell) for cell in folded.in_cells.values()) == 2 * len(READS[name])
    assert sum(cell[-1] for cell in folded.in_cells.values()) == 2 * sum(size for _key, size in READS[name])


def test_fold_of_random_reads_counts_what_counting_each_put_counts() -> None:
    rng = random.Random(26)
    keys: list[InKey] = [TOPIC, "Other", (TOPIC, "delay"), (TOPIC, "transaction")]
    bounds = [*SIZE_BUCKETS.bounds, SIZE_BUCKETS.bounds[-1] * 2]
    reads = []
    for _ in range(300):
        size = rng.choice([1, 4, 64]) if rng.random() < 0.8 else rng.randrange(1, 65)
        one_key = rng.random() < 0.6
        key = rng.choice(keys)
        bound = rng.choice(bounds)
        reads.append(
            [
                (
                    key if one_key else rng.choice(keys),
                    rng.randrange(bound - 2, bound + 3) if rng.random() < 0.5 else 1200,
                )
                for _ in range(size)
            ]
        )
    folded, plain = _folded(reads), _plainly(reads)
    assert folded.in_cells == plain.in_cells
    assert sum(SIZE_BUCKETS.count(cell) for cell in folded.in_cells.values()) == sum(map(len, reads))


def test_a_batch_counts_each_message_at_its_average_size() -> None:
    meters = BrokerMeters()
    meters.count_batch((TOPIC, "normal"), 3, 3000 + 2)  # 1000 each on average, 2 bytes left over
    cell = meters.normal_cells[TOPIC]
    assert cell[0] == 3 and SIZE_BUCKETS.count(cell) == 3
    assert cell[-1] == 3002
