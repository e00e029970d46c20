"""Disk space reserved ahead of the CommitLog's writer (broker/store/reserve.py, MappedFile.reserve and
make_room): bounded, never under a record, zero-filled where group commit wants it, and a writer that
outruns the reserver reserves for itself. Real files, a real thread."""

from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.protocol.message import decode_records
from broker.store.config import StoreConfig
from broker.store.mapped_file import SYNC_RESERVE, ZERO_FILL_WRITE, MappedFile, write_zeros
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.message_store import MessageStore
from broker.store.reserve import Reserver
from broker.store.results import MessageToStore, PutStatus

SIZE = 8 << 20


def _record(i: int) -> bytes:
    body = (i.to_bytes(4, "big") * 300)[: 200 + i % 900]
    return len(body).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _queue_with(mf: MappedFile) -> MappedFileQueue:
    queue = MappedFileQueue(mf.path.parent, mf.file_size, preallocate=True)
    queue.install(mf)
    return queue


@pytest.mark.parametrize("zero", [True, False])
def test_a_writer_racing_the_reserver_keeps_every_record_and_stays_within_the_bound(tmp_path: Path, zero: bool) -> None:
    ahead = 256 << 10
    for round_ in range(3):
        mf = MappedFile.create(tmp_path / f"{round_ * SIZE:020d}", SIZE, reserve=0)
        assert mf.reserved_to == 0 and _allocated(mf.path) == 0
        executor = ThreadPoolExecutor(1)
        reserver = Reserver(_queue_with(mf), executor, ahead, zero=zero, spare=lambda: None)
        reserver.attach(mf)
        i = 0
        worst = 0
        while mf.append_bytes(_record(i)):  # past the trigger the writer pokes; past reserved_to it waits
            worst = max(worst, mf.reserved_to - mf.wrote_position)
            i += 1
        reserver.stop()
        executor.shutdown(wait=True)
        assert reserver.runs > 0
        # never more than `ahead` (plus the chunk and page the last step rounds to) beyond the writer
        assert worst <= ahead + SYNC_RESERVE, worst
        pos, n = 0, 0
        while n < i:
            length = int.from_bytes(mf.mm[pos : pos + 4], "big")
            crc = int.from_bytes(mf.mm[pos + 4 : pos + 8], "big")
            body = bytes(mf.mm[pos + 8 : pos + 8 + length])
            assert body == _record(n)[8:] and zlib.crc32(body) == crc, f"round {round_}: record {n} damaged"
            pos += 8 + length
            n += 1
        mf.close()


def test_the_reservation_is_bounded_and_zero_filled(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE, reserve=0)
    mf.append_bytes(b"\x01" * 1000)  # no reserver: the writer reserves SYNC_RESERVE beyond its write
    assert mf.reserved_to == 1000 + SYNC_RESERVE + (-(1000 + SYNC_RESERVE) % 4096)
    mf.reserve(mf.reserved_to + (1 << 20), zero=True, chunk=256 << 10)
    reserved = mf.reserved_to
    assert reserved == 1000 + SYNC_RESERVE + (-(1000 + SYNC_RESERVE) % 4096) + (1 << 20)
    assert bytes(mf.mm[:1000]) == b"\x01" * 1000
    # nothing allocated beyond the reservation: the file is sparse there
    with pytest.raises(OSError):
        os.lseek(mf.fd, reserved, os.SEEK_DATA)
    # the zero-filled part is written zeros, not unwritten extents: no hole in it
    assert os.lseek(mf.fd, reserved - (1 << 20), os.SEEK_HOLE) == reserved
    assert _allocated(mf.path) <= reserved + (64 << 10)
    mf.close()


def test_a_loaded_file_knows_what_it_has_reserved(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}"
    mf = MappedFile.create(path, SIZE, reserve=0)
    mf.reserve(2 << 20, zero=True, chunk=1 << 20)
    mf.close()
    again = MappedFile(path, SIZE)
    assert again.reserved_to == 2 << 20  # SEEK_HOLE: the first hole is where the reservation ended
    again.close()


async def test_a_store_uses_disk_as_it_writes(tmp_path: Path) -> None:
    ahead = 4 << 20
    config = StoreConfig(
        store_path_root_dir=tmp_path,
        mapped_file_size_commit_log=64 << 20,
        commit_log_preallocate_ahead=ahead,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
    store = MessageStore(config)
    await store.start()
    commitlog = config.commit_log_dir
    for i in range(20_000):  # ~23 MB of records
        msg = MessageToStore(topic="T", queue_id=i % 4, body=b"x" * 1000, properties={"KEYS": f"k{i}"})
        assert (await store.put(msg)).status is PutStatus.PUT_OK
    await store.commit_log.allocator.ready()
    written = store.commit_log.max_offset
    files = sorted(commitlog.iterdir())
    assert len(files) == 2  # the file being written and the prepared next one
    used = sum(_allocated(p) for p in files)
    assert used <= written + ahead + (1 << 20), (used, written)
    assert _allocated(files[1]) == 0  # the next file: far from the writer, nothing reserved yet
    await store.shutdown()


async def test_crossing_into_the_next_file_reserves_its_head(tmp_path: Path) -> None:
    config = StoreConfig(
        store_path_root_dir=tmp_path,
        mapped_file_size_commit_log=8 << 20,
        commit_log_preallocate_ahead=4 << 20,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
    store = MessageStore(config)
    await store.start()
    for _ in range(7 * 1024):  # ~7.4 MB: within `ahead` of the end of the first file
        msg = MessageToStore(topic="T", queue_id=0, body=b"y" * 900)
        assert (await store.put(msg)).status is PutStatus.PUT_OK
    await store.commit_log.allocator.ready()
    first, spare = sorted(config.commit_log_dir.iterdir())
    assert _allocated(first) >= 8 << 20  # whole
    assert 0 < _allocated(spare) <= 4 << 20  # its head, ready for the roll
    await store.shutdown()


async def test_a_sync_flush_store_zero_fills_ahead_and_keeps_every_message(tmp_path: Path) -> None:
    config = StoreConfig(
        store_path_root_dir=tmp_path,
        flush_disk_type="SYNC_FLUSH",
        mapped_file_size_commit_log=128 << 20,
        commit_log_preallocate_ahead=16 << 20,
    )
    store = MessageStore(config)
    await store.start()
    first = store.commit_log.queue.files[0]
    results = []
    for i in range(300):
        msg = MessageToStore(topic="T", queue_id=0, body=b"m%05d" % i + b"x" * 1000, properties={"KEYS": f"k{i}"})
        results.append(await store.put(msg))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    await store.commit_log.allocator.ready()
    assert first.reserved_to >= first.wrote_position + (8 << 20)  # at least half the distance ahead
    assert first.reserved_to <= first.wrote_position + (16 << 20) + 4096
    # zero-filled: no hole from the writer to the end of the reservation
    assert os.lseek(first.fd, first.wrote_position, os.SEEK_HOLE) == first.reserved_to
    bodies: list[bytes] = []
    while len(bodies) < 300:  # a pull returns at most 256 KiB
        got = store.get_message("G", "T", 0, len(bodies), 400)
        assert got.message_count > 0
        bodies += [m.body[:6] for m in decode_records(b"".join(got.buffers), verify_crc=True)]
        got.release()
    assert bodies == [b"m%05d" % i for i in range(300)]
    await store.shutdown()


def _bytes_dirtied() -> int:
    """What this process has dirtied in the page cache so far (the kernel counts whole folios)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs the kernel's per-task I/O accounting")
@pytest.mark.parametrize("how", ["created warm", "reserved zero-filled"])
def test_a_store_into_a_zero_filled_file_dirties_a_small_folio(tmp_path: Path, how: str) -> None:
    # The folio a page-cache write creates is as large as the write (Linux 6.16+ ext4, XFS), and a store
    # through the mapping dirties, so a group commit writes back, the whole folio: ~2 MiB after a 1 MiB
    # zero-fill write. This is the accounting the kernel does when the folio turns dirty.
    if how == "created warm":
        mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE, warm=True)
    else:
        mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE, reserve=0)
        mf.reserve(SIZE, zero=True, chunk=4 << 20)
    os.fdatasync(mf.fd)  # every zero-filled page clean
    before = _bytes_dirtied()
    spots = 16
    for n in range(spots):  # one small record every 64 KiB, in the reserved part
        at = (2 << 20) + n * (64 << 10)
        mf.mm[at : at + 100] = b"r" * 100
    dirtied = _bytes_dirtied() - before
    # small folios: at most 16 KiB a store (256 KiB); the failure guarded against dirties the whole ~2 MiB folio
    # the stores share. The counter is the process's: 1 MiB leaves room for pages other threads of a long run write.
    assert dirtied <= 1 << 20, f"{dirtied} bytes of page cache dirtied by {spots} stores"
    mf.close()


def test_write_zeros_covers_exactly_its_range(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\xee" * 100_000)
    fd = os.open(path, os.O_RDWR)
    try:
        write_zeros(fd, 1, 1 + ZERO_FILL_WRITE * 3 + 5)  # unaligned start and a short last piece
    finally:
        os.close(fd)
    data = path.read_bytes()
    end = 1 + ZERO_FILL_WRITE * 3 + 5
    assert data[:1] == b"\xee" and data[end:] == b"\xee" * (100_000 - end)
    assert data[1:end] == bytes(end - 1)
