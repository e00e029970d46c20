"""Direct dispatch: with the index in its helper process, the reput service's `appended` (the CommitLog's
dispatch sink) writes a record's ConsumeQueue unit itself when the record is next in line, and keeps a
request for the reput pass when it is not.

Real store, real files, a real index helper process; one test makes a unit write fail on purpose (a
stand-in for a full disk, which the full-disk tests cover for real) to show the fallback keeps the order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.protocol.javahash import tags_code
from broker.protocol.properties import encode_properties
from broker.store import MessageStore, MessageToStore, PutStatus
from broker.store.consume_queue import ConsumeQueue
from broker.store.dispatch_request import DispatchRequest, parse_record
from tests.store.store_helpers import dispatched, small_config

TOPIC = "DirectTopic"


def sent(i: int, queue_id: int = 0, tags: str = "TagA", size: int = 300) -> MessageToStore:
    """A message as the broker's send path hands it over: properties as wire text, keys looked up."""
    props = {"TAGS": tags, "KEYS": f"key-{i}", "UNIQ_KEY": f"UNIQ{i:08d}"}
    return MessageToStore(
        topic=TOPIC,
        queue_id=queue_id,
        body=(b"direct-%d-" % i * 40)[:size],
        born_timestamp=1_700_000_000_000 + i,
        born_host=("127.0.0.1", 40000),
        properties_bytes=(encode_properties(props) + "\x02").encode(),
        dispatch_keys=(tags, f"key-{i}", f"UNIQ{i:08d}"),
    )


def assert_units_match_records(store: MessageStore, expected: dict[int, int]) -> None:
    """Each queue holds `expected[queue_id]` units, and unit n points at the record with queue offset n."""
    cqs = store.consume_queue_store
    for queue_id, count in expected.items():
        assert cqs.get_max_offset(TOPIC, queue_id) == count
        cq = cqs.find(TOPIC, queue_id)
        assert cq is not None
        for n in range(count):
            unit = cq.get_index(n)
            assert unit is not None
            phy, size, code = unit
            mf = store.commit_log.queue.find_mapped_file_by_offset(phy)
            assert mf is not None
            got, parsed = parse_record(mf.mm, phy - mf.file_from_offset, mf.wrote_position, check_crc=True)
            assert parsed is not None and got == size
            assert (parsed.topic, parsed.queue_id, parsed.consume_queue_offset) == (TOPIC, queue_id, n)
            assert parsed.tags_code == code


def test_direct_units_equal_the_records_across_rolls(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, index_helper_enable=True))
        await store.start()
        arrivals: list[tuple[int, int, int]] = []
        store.add_arrival_listener(
            lambda topic, queue_id, offset, code, _props: arrivals.append((queue_id, offset, code))
        )
        assert store.reput.dispatches_appended, "the index helper runs, so the put path dispatches directly"
        cqs = store.consume_queue_store
        real_dispatch = cqs.dispatch
        by_pass = 0

        def counting(request: DispatchRequest) -> None:
            nonlocal by_pass
            by_pass += 1
            real_dispatch(request)

        cqs.dispatch = counting  # type: ignore[method-assign]
        try:
            expected = {0: 0, 1: 0, 2: 0}
            for i in range(300):  # ~1,000 bytes a record: rolls over several 64 KiB files
                m = sent(i, queue_id=i % 3, tags=f"T{i % 5}")
                if i % 7 == 0:
                    m.dispatch_keys = None  # no keys looked up: the CommitLog reads them from the properties
                result = await store.put(m)
                assert result.status is PutStatus.PUT_OK
                expected[i % 3] += 1
                await asyncio.sleep(0)  # a reput pass, as between the broker's reads
            batch = await store.put([sent(1000 + i, queue_id=1) for i in range(5)])
            assert batch.status is PutStatus.PUT_OK
            expected[1] += 5
            await dispatched(store)
            assert_units_match_records(store, expected)
            # every record went direct but the first of each queue (the pass creates the queue), the first
            # of each new CommitLog file (after the blank record), the first of each new ConsumeQueue
            # file (50 units: one new file in queues 0 and 2, two in queue 1), and the batch's other four
            # (the batch's first needs queue 1's third file, and the rest are not next in line until the
            # pass has run)
            files = len(store.commit_log.queue.files)
            assert 0 < by_pass <= 3 + (files - 1) + 4 + 4
            # the arrival listeners heard of each record once, with its tags code
            heard = sorted((q, o) for q, o, _ in arrivals)
            assert heard == sorted((q, o) for q in expected for o in range(1, expected[q] + 1))
            for q, o, code in arrivals:
                if o <= 100:  # one of the first 300: message (o - 1) * 3 + q
                    assert code == tags_code(f"T{((o - 1) * 3 + q) % 5}")
        finally:
            await store.shutdown()
        assert not store.reput.dispatches_appended

    asyncio.run(main())


def test_a_unit_that_fails_is_retried_by_the_pass_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_put = ConsumeQueue.put_next
    failures = [0]

    def failing_once(cq: ConsumeQueue, phy: int, size: int, code: int, cq_offset: int) -> bool:
        if cq_offset == 5 and not failures[0]:
            failures[0] += 1
            return False  # as when the unit needs a new ConsumeQueue file (the pass creates it)
        return real_put(cq, phy, size, code, cq_offset)

    monkeypatch.setattr(ConsumeQueue, "put_next", failing_once)

    async def main() -> None:
        store = MessageStore(small_config(tmp_path, message_index_enable=False))
        await store.start()
        cqs = store.consume_queue_store
        try:
            assert store.reput.dispatches_appended  # no index at all: direct too
            assert (await store.put(sent(0, size=100))).status is PutStatus.PUT_OK
            await dispatched(store)  # a new queue: the pass creates it, and the next records go direct
            for i in range(1, 10):
                assert (await store.put(sent(i, size=100))).status is PutStatus.PUT_OK
            # the failed record and the four after it wait for the pass, as requests; the first five are in
            assert failures[0] == 1
            assert cqs.get_max_offset(TOPIC, 0) == 5
            assert store.reput.pending == 5
            await dispatched(store)
            assert_units_match_records(store, {0: 10})
            # caught up: the next record goes direct again
            assert (await store.put(sent(10, size=100))).status is PutStatus.PUT_OK
            assert cqs.get_max_offset(TOPIC, 0) == 11 and not store.reput.pending
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_another_dispatcher_turns_direct_dispatch_off(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, message_index_enable=False))
        await store.start()
        seen: list[int] = []

        class Recorder:
            def dispatch(self, request: object) -> None:
                seen.append(1)

        try:
            assert store.reput.dispatches_appended
            store.reput.add_dispatcher(Recorder())
            assert not store.reput.dispatches_appended
            for i in range(3):
                await store.put(sent(i, size=100))
            await dispatched(store)
            assert len(seen) == 3
            assert_units_match_records(store, {0: 3})
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_the_in_process_index_keeps_the_pass(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, index_helper_enable=False))
        await store.start()
        try:
            assert not store.reput.dispatches_appended  # the index needs each record's keys: requests
            for i in range(3):
                await store.put(sent(i, size=100))
            await dispatched(store)
            assert_units_match_records(store, {0: 3})
            found = store.query_message(TOPIC, "key-1", 10, 0, 2**62)
            assert len(found.buffers) == 1
            found.release()
        finally:
            await store.shutdown()

    asyncio.run(main())
