"""IndexFile and IndexService on real files in a tmp dir, with few slots and entries so that files roll."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.javahash import index_key_hash, java_string_hash
from broker.protocol.message import SysFlag
from broker.store.dispatch_request import DispatchRequest
from broker.store.index_file import HEADER_SIZE, IndexFile, index_file_size, key_hash
from broker.store.index_service import IndexService

T0 = 1_700_000_000_000
SLOTS = 16
ENTRIES = 7  # 6 usable entries per file: indexCount starts at 1


def req(phy: int, *, uniq: str | None = None, keys: str | None = None, ts: int | None = None, topic: str = "T",
        sys_flag: int = 0) -> DispatchRequest:  # fmt: skip
    return DispatchRequest(
        topic=topic,
        queue_id=0,
        commit_log_offset=phy,
        msg_size=100,
        tags_code=0,
        store_timestamp=T0 + phy if ts is None else ts,
        consume_queue_offset=phy // 100,
        keys=keys,
        uniq_key=uniq,
        sys_flag=sys_flag,
    )


@pytest.fixture
def service(tmp_path: Path) -> IndexService:
    s = IndexService(tmp_path / "index", hash_slot_num=SLOTS, index_num=ENTRIES)
    s.load(True)
    yield s
    s.close()


def reopen(service: IndexService, *, clean: bool = True) -> IndexService:
    service.close()
    again = IndexService(service.directory, hash_slot_num=service.hash_slot_num, index_num=service.index_num)
    assert again.load(clean)
    return again


def q(service: IndexService, key: str, max_num: int = 100, topic: str = "T", begin: int = 0, end: int = 2**62):
    return service.query(topic, key, max_num, begin, end)


# -- hashes ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [("T#k1", 2539445), ("hello", 99162322), ("polygenelubricants", 0), ("中文", 646394)],
)
def test_index_key_hash_vectors(key: str, expected: int) -> None:
    assert index_key_hash(key) == expected
    assert key_hash(key) == expected


def test_key_hash_of_long_keys_with_negative_hash() -> None:
    key = "TopicTest#7F0000010B6C18B4AAC2336B2D3F0000"  # topic#UNIQ_KEY shape
    expected = java_string_hash(key)
    assert key_hash(key) == (0 if expected == -(2**31) else abs(expected))


@given(st.text(max_size=80))
def test_key_hash_matches_java(key: str) -> None:
    assert key_hash(key) == index_key_hash(key)


@given(st.text(alphabet="0123456789ABCDEF", min_size=20, max_size=60))
def test_key_hash_matches_java_for_hex_keys(suffix: str) -> None:
    key = "SomeTopic#" + suffix
    assert key_hash(key) == index_key_hash(key)


# -- file layout -----------------------------------------------------------------------------------------


def test_golden_header_slot_and_entries(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    f = IndexFile.create(path, 10, 5)
    h = index_key_hash("T#k1")  # 2539445, slot 5
    assert f.put_key("T#k1", 100, T0)
    assert f.put_key("T#k1", 200, T0 + 5_999)  # 5.999 s later: timeDiff keeps whole seconds
    f.flush()
    raw = path.read_bytes()
    assert len(raw) == index_file_size(10, 5) == 40 + 10 * 4 + 5 * 20
    header = struct.pack(">qqqqii", T0, T0 + 5_999, 100, 200, 1, 3)
    assert raw[:HEADER_SIZE] == header
    assert raw[:8].hex() == "0000018bcfe56800"
    slots = [struct.unpack_from(">i", raw, 40 + 4 * i)[0] for i in range(10)]
    assert slots == [0, 0, 0, 0, 0, 2, 0, 0, 0, 0]
    entries_at = 40 + 10 * 4
    assert raw[entries_at : entries_at + 20] == bytes(20)  # entry 0 is never used
    assert raw[entries_at + 20 : entries_at + 40] == struct.pack(">iqii", h, 100, 0, 0)
    assert raw[entries_at + 40 : entries_at + 60] == struct.pack(">iqii", h, 200, 5, 1)
    assert raw[entries_at + 20 : entries_at + 40].hex() == "0026bfb500000000000000640000000000000000"
    f.close()


def test_file_is_full_at_index_num_minus_one(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 4, 3)
    assert f.put_key("a", 1, T0) and f.put_key("b", 2, T0)
    assert f.is_write_full
    assert not f.put_key("c", 3, T0)
    f.close()


def test_java_file_with_unflushed_header_loads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    path.write_bytes(bytes(index_file_size(SLOTS, ENTRIES)))  # Java writes the header only on flush
    f = IndexFile(path, SLOTS, ENTRIES)
    assert f.index_count == 1 and f.entry_count == 0
    f.close()


# -- service ---------------------------------------------------------------------------------------------


def test_uniq_key_and_each_key_are_indexed(service: IndexService) -> None:
    service.dispatch(req(100, uniq="U1", keys="order-1  order-2 "))
    service.dispatch(req(200, uniq="U2", keys="order-1"))
    assert q(service, "U1") == [100]
    assert q(service, "order-1") == [200, 100]  # newest first
    assert q(service, "order-2") == [100]
    assert q(service, "order-1", max_num=1) == [200]
    assert q(service, "order-1", topic="Other") == []
    assert q(service, "") == []
    assert service.end_phy_offset == 200
    assert service.last_update_timestamp == T0 + 200


def test_rollback_is_not_indexed_but_prepared_is(service: IndexService) -> None:
    service.dispatch(req(100, uniq="U1", sys_flag=SysFlag.TRANSACTION_ROLLBACK_TYPE))
    service.dispatch(req(200, uniq="U2", sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE))
    assert q(service, "U1") == []
    assert q(service, "U2") == [200]


def test_rolls_to_new_files_and_queries_across_them(service: IndexService) -> None:
    for i in range(1, 21):  # 40 entries: 7 files of 6 entries
        service.dispatch(req(i * 100, uniq=f"U{i}", keys="same"))
    names = [f.path.name for f in service.files]
    assert len(names) == 7
    assert names == sorted(names) and len(set(names)) == 7
    assert all(len(n) == 17 and n.isdigit() for n in names)
    assert q(service, "same") == [i * 100 for i in range(20, 0, -1)]
    assert q(service, "U7") == [700]
    # a rolled file starts where the previous one ended
    assert service.files[1].begin_phy_offset >= service.files[0].end_phy_offset


def test_time_range(service: IndexService) -> None:
    for i in range(6):
        service.dispatch(req(100 * (i + 1), keys="k", ts=T0 + i * 10_000))  # one every 10 s
    assert q(service, "k", begin=T0 + 20_000, end=T0 + 40_000) == [500, 400, 300]
    assert q(service, "k", begin=T0 + 55_000) == []
    assert q(service, "k", end=T0 - 1) == []


def test_redispatch_after_restart_is_idempotent(service: IndexService) -> None:
    service.dispatch(req(100, uniq="U1", keys="a"))
    service.dispatch(req(200, uniq="U2"))  # the process dies before KEYS "b c" of this record were indexed
    service.flush()
    again = reopen(service, clean=False)
    for r in (req(100, uniq="U1", keys="a"), req(200, uniq="U2", keys="b c"), req(300, uniq="U3")):
        again.dispatch(r)
    assert q(again, "a") == [100]
    assert q(again, "U2") == [200]  # indexed twice, returned once
    assert q(again, "b") == [200] and q(again, "c") == [200]
    assert q(again, "U3") == [300]
    again.close()


def test_truncate_dirty_forgets_entries_beyond_the_commit_log(service: IndexService) -> None:
    for i in range(1, 11):  # 20 entries over 4 files
        service.dispatch(req(i * 100, uniq=f"U{i}", keys="k"))
    assert len(service.files) == 4
    again = reopen(service, clean=False)
    removed = again.truncate_dirty(450)  # the CommitLog was recovered to 450: records 500.. are gone
    assert removed == 12
    assert len(again.files) == 2
    assert again.end_phy_offset == 400
    assert q(again, "k") == [400, 300, 200, 100]
    assert q(again, "U5") == []
    # new records at the same offsets are indexed again, the old keys stay forgotten
    again.dispatch(req(450, uniq="N1", keys="k"))
    assert q(again, "k") == [450, 400, 300, 200, 100]
    assert q(again, "N1") == [450]
    third = reopen(again)
    assert q(third, "k") == [450, 400, 300, 200, 100]
    third.close()


def test_truncate_restores_the_slot_chain(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 1, 10)  # one slot: every key shares a chain
    for i, k in enumerate(["a", "b", "a", "c", "a"], start=1):
        f.put_key(k, i * 100, T0 + i * 1000)
    assert f.truncate(350) == 2
    out: list[int] = []
    f.select(out, key_hash("a"), 10, 0, 2**62)
    assert out == [300, 100]
    assert f.slot(0) == 3 and f.index_count == 4
    assert f.end_phy_offset == 300 and f.end_timestamp == T0 + 3000
    assert f.put_key("a", 400, T0 + 4000)
    out.clear()
    f.select(out, key_hash("a"), 10, 0, 2**62)
    assert out == [400, 300, 100]
    f.close()


def test_empty_newest_file_beyond_new_end_is_deleted(service: IndexService) -> None:
    for i in range(1, 4):  # exactly 6 entries: the first file is full
        service.dispatch(req(i * 100, uniq=f"U{i}", keys="k"))
    service._roll()  # a new, empty file inherits endPhyOffset 300
    assert len(service.files) == 2 and service.end_phy_offset == 300
    service.truncate_dirty(250)
    assert len(service.files) == 1 and service.end_phy_offset == 200
    service.dispatch(req(250, uniq="N"))  # not skipped as "already indexed"
    assert q(service, "N") == [250]


def test_delete_expired_never_deletes_the_newest(service: IndexService) -> None:
    for i in range(1, 11):
        service.dispatch(req(i * 100, uniq=f"U{i}", keys="k"))
    paths = [f.path for f in service.files]
    assert service.delete_expired(700) == 2  # files ending at 300 and 600
    assert not paths[0].exists() and not paths[1].exists()
    assert q(service, "k") == [1000, 900, 800, 700]
    assert service.delete_expired(10**9) == 1
    assert len(service.files) == 1 and service.files[0].path == paths[-1]


def test_load_skips_files_of_another_geometry(tmp_path: Path) -> None:
    d = tmp_path / "index"
    d.mkdir()
    (d / "20240101000000000").write_bytes(bytes(100))
    s = IndexService(d, hash_slot_num=SLOTS, index_num=ENTRIES)
    assert not s.load(True)
    assert s.files == []
    s.close()


def test_dispatch_cost_stays_small(service: IndexService) -> None:
    """Not a benchmark (see bench/index.py): catches an accidental per-message slowdown by 10x."""
    big = IndexService(service.directory.parent / "big", hash_slot_num=50_000, index_num=200_000)
    big.load(True)
    reqs = [req(i * 100, uniq=f"7F0000010B6C18B4AAC2{i:012X}", keys=f"order-{i}") for i in range(1, 20_001)]
    t = time.perf_counter()
    for r in reqs:
        big.dispatch(r)
    per_msg = (time.perf_counter() - t) / len(reqs)
    assert q(big, "order-777") == [77_700]
    assert per_msg < 100e-6
    big.close()
