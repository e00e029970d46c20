"""ConsumeQueue and ConsumeQueueStore on real files in a tmp dir, with small files so that they roll."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.protocol.javahash import java_string_hash, tags_code
from broker.protocol.message import SysFlag
from broker.store.consume_queue import (
    BLANK_UNIT_SIZE,
    CQ_STORE_UNIT_SIZE,
    UNIT,
    ConsumeQueue,
    ConsumeQueueStore,
)
from broker.store.dispatch_request import DispatchRequest

UNITS_PER_FILE = 10
FILE_SIZE = UNITS_PER_FILE * CQ_STORE_UNIT_SIZE
MSG = 100  # record size used by the helpers


def req(offset: int, *, topic: str = "T", qid: int = 0, phy: int | None = None, tags: int = 0, sys_flag: int = 0):
    return DispatchRequest(
        topic=topic,
        queue_id=qid,
        commit_log_offset=offset * MSG if phy is None else phy,
        msg_size=MSG,
        tags_code=tags,
        store_timestamp=1_700_000_000_000 + offset,
        consume_queue_offset=offset,
        sys_flag=sys_flag,
    )


def fill(store: ConsumeQueueStore, n: int, *, start: int = 0, topic: str = "T", qid: int = 0) -> None:
    for i in range(start, start + n):
        store.dispatch(req(i, topic=topic, qid=qid, tags=i))


@pytest.fixture
def store(tmp_path: Path) -> ConsumeQueueStore:
    s = ConsumeQueueStore(tmp_path / "consumequeue", FILE_SIZE)
    yield s
    s.close()


def reopen(store: ConsumeQueueStore) -> ConsumeQueueStore:
    store.close()
    again = ConsumeQueueStore(store.root, store.file_size)
    assert again.load()
    again.recover()
    return again


# -- Java hash vectors (tagsCode is String.hashCode, sign-extended) -----------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),  # the classic collision
        ("polygenelubricants", -(2**31)),  # hashCode() == Integer.MIN_VALUE
        ("中文", 646394),  # UTF-16 code units
        ("😀", 1772899),  # a surrogate pair counts as two units
    ],
)
def test_java_string_hash_vectors(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_golden_unit_bytes(store: ConsumeQueueStore) -> None:
    store.dispatch(req(0, phy=1234567890123, tags=tags_code("TagA")))
    store.dispatch(req(1, phy=1234567890423, tags=tags_code("polygenelubricants")))
    raw = (store.root / "T" / "0" / ("0" * 20)).read_bytes()
    assert raw[:20] == bytes.fromhex("0000011f71fb04cb00000064000000000027a807")
    # a negative hash is sign-extended to 64 bits
    assert raw[20:40] == bytes.fromhex("0000011f71fb05f700000064ffffffff80000000")
    assert raw[40:60] == bytes(20)


# -- dispatch and reads ----------------------------------------------------------------------------------


def test_dispatch_rolls_files_and_reads_back(store: ConsumeQueueStore) -> None:
    fill(store, 25)
    cq = store.find("T", 0)
    assert cq is not None
    names = sorted(p.name for p in (store.root / "T" / "0").iterdir())
    assert names == [f"{0:020d}", f"{FILE_SIZE:020d}", f"{2 * FILE_SIZE:020d}"]
    assert (cq.get_min_offset(), cq.get_max_offset()) == (0, 25)
    assert store.get_max_offset("T", 0) == 25
    assert store.get_max_offset("nope", 0) == 0
    assert cq.get_index(13) == (13 * MSG, MSG, 13)
    assert cq.get_index(25) is None
    assert cq.max_physic_offset == 25 * MSG
    assert store.max_physic_offset() == 25 * MSG
    assert store.topics_and_queues() == {"T": [0]}


def test_read_units_stays_within_one_file(store: ConsumeQueueStore) -> None:
    fill(store, 25)
    cq = store.find("T", 0)
    assert cq is not None
    with cq.read_units(7, 32) as view:  # only to the end of the first file
        units = list(UNIT.iter_unpack(view))
    assert [u[2] for u in units] == [7, 8, 9]
    with cq.read_units(20, 32) as view:  # only up to what was written
        assert len(view) == 5 * CQ_STORE_UNIT_SIZE
    assert cq.read_units(25, 1) is None
    assert cq.read_units(-1, 1) is None


def test_prepared_and_rollback_are_not_dispatched(store: ConsumeQueueStore) -> None:
    store.dispatch(req(0, sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE))
    store.dispatch(req(0, sys_flag=SysFlag.TRANSACTION_ROLLBACK_TYPE))
    assert store.find("T", 0) is None
    store.dispatch(req(0, sys_flag=SysFlag.TRANSACTION_COMMIT_TYPE))
    assert store.get_max_offset("T", 0) == 1


def test_schedule_topic_keeps_the_delivery_time_as_tags_code(store: ConsumeQueueStore) -> None:
    deliver_at = 1_700_000_123_456  # wider than 32 bits: stored as is
    store.dispatch(req(0, topic="SCHEDULE_TOPIC_XXXX", qid=2, tags=deliver_at))
    cq = store.find("SCHEDULE_TOPIC_XXXX", 2)
    assert cq is not None and cq.get_index(0) == (0, MSG, deliver_at)


def test_repeated_dispatch_is_ignored(store: ConsumeQueueStore) -> None:
    fill(store, 5)
    fill(store, 5)  # the same records again (a re-dispatch after restart)
    cq = store.find("T", 0)
    assert cq is not None and cq.get_max_offset() == 5
    # same logical offset with a newer record: the unit already exists, it is not overwritten
    store.dispatch(req(3, phy=10_000))
    assert cq.get_index(3) == (300, MSG, 3)


def test_gap_is_filled_with_blank_units(store: ConsumeQueueStore) -> None:
    fill(store, 3)
    store.dispatch(req(14))  # offsets 3..13 never came: fill, across a file boundary
    cq = store.find("T", 0)
    assert cq is not None and cq.get_max_offset() == 15
    assert cq.get_index(3) == (0, BLANK_UNIT_SIZE, 0)
    assert cq.get_index(13) == (0, BLANK_UNIT_SIZE, 0)
    assert cq.get_index(14) == (1400, MSG, 0)


def test_queue_created_mid_way_starts_with_blanks(store: ConsumeQueueStore) -> None:
    fill(store, 4, start=23)
    cq = store.find("T", 0)
    assert cq is not None
    assert (cq.get_min_offset(), cq.get_max_offset()) == (23, 27)
    assert [p.name for p in cq.directory.iterdir()] == [f"{2 * FILE_SIZE:020d}"]
    assert cq.get_index(22) is None
    assert cq.get_index(23) == (2300, MSG, 23)
    again = reopen(store)
    cq2 = again.find("T", 0)
    assert cq2 is not None and (cq2.get_min_offset(), cq2.get_max_offset()) == (23, 27)
    again.close()


# -- recovery and truncation -----------------------------------------------------------------------------


def test_recover_after_restart(store: ConsumeQueueStore) -> None:
    fill(store, 23)
    fill(store, 4, qid=3)
    store.flush()
    again = reopen(store)
    assert again.topics_and_queues() == {"T": [0, 3]}
    cq = again.find("T", 0)
    assert cq is not None and (cq.get_min_offset(), cq.get_max_offset()) == (0, 23)
    assert cq.max_physic_offset == 23 * MSG
    assert again.max_physic_offset() == 23 * MSG
    fill(again, 2, start=23)  # appending continues where it stopped
    assert cq.get_index(24) == (2400, MSG, 24)
    again.close()


def test_recover_full_last_file_and_torn_unit(store: ConsumeQueueStore) -> None:
    fill(store, 20)  # exactly two full files
    cq = store.find("T", 0)
    assert cq is not None
    # a torn write of the next unit: only its offset field reached the file
    store.dispatch(req(20))
    third = cq.queue.files[-1]
    third.mm[8:20] = bytes(12)
    again = reopen(store)
    cq2 = again.find("T", 0)
    assert cq2 is not None and cq2.get_max_offset() == 20
    assert (cq2.directory / f"{2 * FILE_SIZE:020d}").read_bytes() == bytes(FILE_SIZE)
    again.dispatch(req(20))
    assert cq2.get_index(20) == (2000, MSG, 0)
    again.close()


def test_truncate_dirty_drops_units_beyond_commit_log(store: ConsumeQueueStore) -> None:
    fill(store, 25)
    fill(store, 3, qid=1)
    cq = store.find("T", 0)
    assert cq is not None
    # the CommitLog was recovered to 1250: records at 1200 and beyond are gone, and 1200..1299 is torn
    dropped = store.truncate_dirty(1250)
    assert dropped == 13
    assert cq.get_max_offset() == 12
    assert cq.max_physic_offset == 1200
    assert len(cq.queue.files) == 2
    # dispatch continues with new records at the same offsets
    store.dispatch(req(12, phy=1250))
    assert cq.get_index(12) == (1250, MSG, 0)
    again = reopen(store)  # and nothing stale comes back after a restart
    cq2 = again.find("T", 0)
    assert cq2 is not None and cq2.get_max_offset() == 13
    again.close()


def test_truncate_to_a_file_boundary_and_to_nothing(store: ConsumeQueueStore) -> None:
    fill(store, 15)
    cq = store.find("T", 0)
    assert cq is not None
    assert cq.truncate_dirty(1000) == 5
    assert cq.get_max_offset() == 10
    assert cq.truncate_dirty(0) == 10
    assert cq.get_max_offset() == 0 and cq.max_physic_offset == -1
    fill(store, 2)
    assert cq.get_index(1) == (100, MSG, 1)


# -- retention and time lookup ---------------------------------------------------------------------------


def test_clean_expired_deletes_files_and_advances_min(store: ConsumeQueueStore) -> None:
    fill(store, 25)
    cq = store.find("T", 0)
    assert cq is not None
    # CommitLog files below 1530 were deleted: the first queue file (units 0..9 -> phy < 1000) expires
    assert store.clean_expired(1530) == 1
    assert cq.queue.files[0].file_from_offset == FILE_SIZE
    assert cq.get_min_offset() == 16  # first unit with phy >= 1530 is at 1600
    assert cq.get_index(15) is None
    assert cq.read_units(15, 4) is None
    store.correct_min_offset(100_000)  # everything gone: min reaches max
    assert cq.get_min_offset() == cq.get_max_offset() == 25


def test_offset_by_time(store: ConsumeQueueStore) -> None:
    times = {}
    for i in range(25):
        times[i * MSG] = 1000 + (i // 2) * 10  # two records per timestamp: 1000,1000,1010,1010,...
        store.dispatch(req(i))
    cq = store.find("T", 0)
    assert cq is not None
    calls: list[int] = []

    def store_time_of(phy: int, size: int) -> int:
        assert size == MSG
        calls.append(phy)
        return times.get(phy, -1)

    assert cq.get_offset_by_time(0, store_time_of) == 0
    assert cq.get_offset_by_time(1000, store_time_of) == 0
    assert cq.get_offset_by_time(1010, store_time_of) == 2
    assert cq.get_offset_by_time(1011, store_time_of) == 4
    assert cq.get_offset_by_time(1120, store_time_of) == 24
    assert cq.get_offset_by_time(1121, store_time_of) == 25  # after everything: the max offset
    assert len(calls) < 6 * 6  # a binary search, not a scan
    del times[0], times[100]  # the first records are gone (retention): treated as older
    assert cq.get_offset_by_time(0, store_time_of) == 2


def test_delete_topics(store: ConsumeQueueStore) -> None:
    fill(store, 3, topic="A")
    fill(store, 3, topic="B", qid=2)
    assert store.delete_topics(["A", "missing"]) == 1
    assert not (store.root / "A").exists()
    assert store.topics_and_queues() == {"B": [2]}
    assert store.find("A", 0) is None


def test_rejects_topic_that_is_not_a_directory_name(store: ConsumeQueueStore) -> None:
    with pytest.raises(ValueError):
        store.find_or_create("../x", 0)
    with pytest.raises(ValueError):
        ConsumeQueue("T", 0, store.root, 30)


def test_flush_writes_everything(store: ConsumeQueueStore) -> None:
    fill(store, 15)
    assert store.flush()
    cq = store.find("T", 0)
    assert cq is not None and cq.queue.flushed_where == 15 * CQ_STORE_UNIT_SIZE


def test_wrong_file_size_fails_load(tmp_path: Path) -> None:
    d = tmp_path / "consumequeue" / "T" / "0"
    d.mkdir(parents=True)
    (d / f"{0:020d}").write_bytes(struct.pack(">qiq", 0, 1, 0) * (UNITS_PER_FILE + 1))  # another geometry
    s = ConsumeQueueStore(tmp_path / "consumequeue", FILE_SIZE)
    assert not s.load()
    s.close()
