"""How the broker's metrics count stored messages (broker/metrics/broker_meters.py, queue_scan.py): plain
sends read from the ConsumeQueues at scrape time, less the puts the store reports, and typed sends counted
at their answer. On real store files; the vectorised tally is held equal to observing each unit plainly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.metrics import queue_scan
from broker.metrics.broker_meters import BrokerMeters, plain_sends
from broker.metrics.histogram import Cell
from broker.metrics.queue_scan import SIZE_BUCKETS, tally_units
from broker.store import MessageStore, PutResult
from broker.store.consume_queue import BLANK_UNIT_SIZE, UNIT
from tests.store.store_helpers import message, small_config

TOPIC = "TopicTest"
SKIP = frozenset({"SCHEDULE_TOPIC_XXXX"})

_EDGES = [b + d for b in SIZE_BUCKETS.bounds for d in (-1, 0, 1)]
_SIZES = st.one_of(st.sampled_from([*_EDGES, BLANK_UNIT_SIZE, 1]), st.integers(1, 8 * 1024 * 1024))


def _observed_plainly(sizes: list[int]) -> Cell:
    """The reference: each non-blank unit observed by itself, as Buckets.observe does."""
    cell = SIZE_BUCKETS.cell()
    for _offset, size, _tags in UNIT.iter_unpack(b"".join(UNIT.pack(i * 100, s, 7) for i, s in enumerate(sizes))):
        if size != BLANK_UNIT_SIZE:
            SIZE_BUCKETS.observe(cell, size)
    return cell


@given(st.lists(_SIZES, max_size=300))
def test_the_tally_of_units_equals_observing_each(sizes: list[int]) -> None:
    """Both ways of tallying: a plain loop up to queue_scan._FEW_UNITS units, numpy beyond."""
    units = b"".join(UNIT.pack(i * 100, s, 7) for i, s in enumerate(sizes))
    cell = SIZE_BUCKETS.cell()
    tally_units(memoryview(units), cell)
    assert cell == _observed_plainly(sizes)


@pytest.mark.parametrize(
    ("stored", "reported", "published", "expected"),
    [
        ([3, 0, 300], None, None, [3, 0, 300]),  # nothing reported, first scrape
        ([3, 1, 2300], [0, 1, 2000], None, [3, 0, 300]),  # a delivery subtracted
        ([3, 1, 2300], [0, 1, 2000], [3, 0, 300], [3, 0, 300]),  # unchanged since the last scrape
        ([3, 0, 300], [0, 1, 2000], [3, 0, 300], [3, 0, 300]),  # reported, not in the queues yet: no step back
        ([3, 0, 300], [0, 1, 2000], None, [3, 0, 0]),  # ... nor below zero
        ([5, 2, 4500], [0, 1, 2000], [3, 0, 300], [5, 1, 2500]),  # then it shows, with new sends
    ],
)
def test_plain_sends_are_stored_less_reported_and_never_go_back(
    stored: Cell, reported: Cell | None, published: Cell | None, expected: Cell
) -> None:
    assert plain_sends(stored, reported, published) == expected


def test_a_typed_batch_counts_each_message_at_its_average_size() -> None:
    meters = BrokerMeters()
    meters.count_typed((TOPIC, "fifo"), 3, 3000 + 2)  # 1000 each on average, 2 bytes left over
    cell = meters.in_cells()[(TOPIC, "fifo")]
    assert cell[0] == 3 and SIZE_BUCKETS.count(cell) == 3
    assert cell[-1] == 3002


# ---------------------------------------------------------------------- on a real store


@contextlib.asynccontextmanager
async def _running(root: Path, **config: object) -> AsyncIterator[MessageStore]:
    store = MessageStore(small_config(root, **config))
    await store.start()
    try:
        yield store
    finally:
        await store.shutdown()


def _attached(store: MessageStore, *, master: bool = True) -> BrokerMeters:
    meters = BrokerMeters()
    meters.attach(store, master=master, skip=SKIP)
    return meters


async def _put(store: MessageStore, *msgs: object) -> list[PutResult]:
    return [await store.put(m) for m in msgs]  # type: ignore[arg-type]


def _record_cell(results: list[PutResult]) -> Cell:
    cell = SIZE_BUCKETS.cell()
    for result in results:
        SIZE_BUCKETS.observe(cell, result.wrote_bytes)
    return cell


def test_plain_sends_are_read_from_the_queues_from_the_attach_on(tmp_path: Path) -> None:
    """What the queues held before is not counted; puts after it are, by their record sizes, in every
    topic but the skipped ones; reported puts are not; a batch counts each message by its own size."""

    async def main() -> None:
        async with _running(tmp_path) as store:
            await _put(store, *(message(i) for i in range(5)))
            meters = _attached(store)
            plain = await _put(store, *(message(i, queue_id=i % 2, size=50 + 700 * i) for i in range(6)))
            batch = await store.put([message(100 + i, queue_id=1, size=30 + 1500 * i) for i in range(3)])
            await _put(store, message(1, topic="SCHEDULE_TOPIC_XXXX"), message(2, topic="Other"))
            reported = await store.put(message(3, size=3000), report=True)  # a delivery: into TOPIC, not a send
            assert reported.ok
            cells = meters.in_cells()
            expected = _record_cell(plain)
            batch_cell = _record_cell(
                [PutResult(batch.status, wrote_bytes=b - a) for a, b in _pairs(batch)]
            )  # each message of the batch by its own record size
            assert cells[(TOPIC, "normal")] == [a + b for a, b in zip(expected, batch_cell, strict=True)]
            assert SIZE_BUCKETS.count(cells[("Other", "normal")]) == 1
            assert set(cells) == {(TOPIC, "normal"), ("Other", "normal")}  # SCHEDULE_TOPIC_XXXX skipped
            assert meters.in_cells() == cells  # a scrape with nothing new changes nothing

    asyncio.run(main())


def _pairs(batch: PutResult) -> list[tuple[int, int]]:
    ends = [*batch.offsets[1:], batch.commit_log_offset + batch.wrote_bytes]
    return list(zip(batch.offsets, ends, strict=True))


def test_a_backlog_longer_than_a_read_and_than_a_file_is_read_in_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consume queue files of 50 units, 7 units a read: 130 puts since the last scrape are all counted."""
    monkeypatch.setattr(queue_scan, "_READ_UNITS", 7)

    async def main() -> None:
        async with _running(tmp_path) as store:
            meters = _attached(store)
            results = await _put(store, *(message(i, size=10 + 37 * i) for i in range(130)))
            assert meters.in_cells()[(TOPIC, "normal")] == _record_cell(results)

    asyncio.run(main())


def test_deleted_and_new_topics(tmp_path: Path) -> None:
    """A deleted topic's queues are forgotten, and a topic made (again) later counts from its start."""

    async def main() -> None:
        async with _running(tmp_path) as store:
            await _put(store, *(message(i, topic="Gone") for i in range(4)))
            meters = _attached(store)
            await _put(store, message(1, topic="Gone"))
            assert SIZE_BUCKETS.count(meters.in_cells()[("Gone", "normal")]) == 1
            store.consume_queue_store.delete_topic("Gone")
            meters.in_cells()
            assert all(topic != "Gone" for topic, _queue in meters.scan.read_to)  # type: ignore[union-attr]
            await _put(store, message(2, topic="Gone"), message(3, topic="New"), message(4, topic="New"))
            cells = meters.in_cells()
            assert SIZE_BUCKETS.count(cells[("Gone", "normal")]) == 2  # the counter goes on from 1
            assert SIZE_BUCKETS.count(cells[("New", "normal")]) == 2

    asyncio.run(main())


def test_a_slave_reads_no_queue(tmp_path: Path) -> None:
    """A slave's queues hold what it replicated: it counts typed sends only (and it gets none)."""

    async def main() -> None:
        async with _running(tmp_path) as store:
            meters = _attached(store, master=False)
            await _put(store, message(1))
            assert meters.in_cells() == {}

    asyncio.run(main())


# ---------------------------------------------------------------------- MessageStore.append(..., report=True)


def test_the_store_reports_a_put_in_the_step_that_appends_it(tmp_path: Path) -> None:
    """Single puts, a batch (each record's size), puts that roll the CommitLog file, and a put the
    SYNC_FLUSH group commit answers later: each reported once, before any await, with what it stored."""

    async def main() -> None:
        async with _running(tmp_path, flushDiskType="SYNC_FLUSH") as store:
            reports: list[tuple[str, list[int]]] = []
            store.put_reporter = lambda topic, sizes: reports.append((topic, list(sizes)))
            early = 0
            for i in range(150):  # 64 KiB CommitLog files: several rolls
                before = len(reports)
                put = store.append(message(i, size=900), report=True)
                assert isinstance(put, asyncio.Future)  # SYNC_FLUSH: answered after the group commit
                if len(reports) == before + 1:  # reported at the append, before the answer
                    assert not put.done()
                    early += 1
                result = await put
                assert result.ok and len(reports) == before + 1
                assert reports[-1] == (TOPIC, [result.wrote_bytes])
            assert early >= 140  # all but the puts that rolled to a new file first
            total = 150
            batch = [message(500 + i, size=100 * (i + 1)) for i in range(4)]
            result = await store.put(batch)  # not reported
            assert len(reports) == total
            put = store.append(batch, report=True)
            result = put if isinstance(put, PutResult) else await put
            assert reports[-1] == (TOPIC, [b - a for a, b in _pairs(result)])
            assert len(reports) == total + 1
        refused = store.append(message(1), report=True)  # shut down: refused, nothing stored, nothing reported
        assert isinstance(refused, PutResult) and not refused.ok
        assert len(reports) == total + 1

    asyncio.run(main())
