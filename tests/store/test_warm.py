"""FileWarmer (broker/store/warm.py) zero-fills a CommitLog file ahead of its writer and never touches a
record: a writer appending as fast as it can in the main thread while the warmer runs in a real thread,
on real files, with margins small enough that the two keep meeting."""

from __future__ import annotations

import asyncio
import os
import threading
import zlib
from pathlib import Path

import pytest

from broker.protocol.message import decode_records
from broker.store.config import StoreConfig
from broker.store.mapped_file import ZERO_FILL_WRITE, MappedFile, write_zeros
from broker.store.message_store import MessageStore
from broker.store.results import MessageToStore, PutStatus
from broker.store.warm import FileWarmer

SIZE = 8 << 20


def _record(i: int) -> bytes:
    body = (i.to_bytes(4, "big") * 300)[: 200 + i % 900]
    return len(body).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body


def test_a_writer_racing_the_warmer_keeps_every_record(tmp_path: Path) -> None:
    for round_ in range(5):
        mf = MappedFile.create(tmp_path / f"{round_:020d}", SIZE)
        mf.mm[:] = b"\xee" * SIZE  # garbage where nothing was written yet: zeroing shows as 0x00
        mf.warmer = warmer = FileWarmer(mf, margin=64 << 10, margin_min=16 << 10, chunk=32 << 10)
        thread = threading.Thread(target=warmer.run)
        thread.start()
        i = 0
        while mf.append_bytes(_record(i)):  # the writer claims, checks the guard and waits when it must
            i += 1
        warmer.stop()
        thread.join(10)
        assert not thread.is_alive()
        pos, n = 0, 0
        while n < i:
            length = int.from_bytes(mf.mm[pos : pos + 4], "big")
            crc = int.from_bytes(mf.mm[pos + 4 : pos + 8], "big")
            body = bytes(mf.mm[pos + 8 : pos + 8 + length])
            assert body == _record(n)[8:] and zlib.crc32(body) == crc, f"round {round_}: record {n} damaged"
            pos += 8 + length
            n += 1
        mf.close()


def test_the_warmer_zero_fills_ahead_and_stays_behind_its_guard(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE)
    mf.append_bytes(b"\x01" * 1000)
    warmer = FileWarmer(mf, margin=1 << 20, margin_min=4096, chunk=256 << 10)
    warmer.run()
    assert warmer.warmed_from == 1052672  # 1000 + 1 MiB ahead of the writer, rounded up to a page
    assert warmer.warmed_to == SIZE
    assert bytes(mf.mm[:1000]) == b"\x01" * 1000
    # written zeros, not unwritten extents: SEEK_HOLE finds no hole in the warmed range
    assert os.lseek(mf.fd, warmer.warmed_from, os.SEEK_HOLE) == SIZE
    mf.close()


def test_a_sync_flush_store_warms_its_first_file_and_keeps_every_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = StoreConfig(
            store_path_root_dir=tmp_path, flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=128 << 20
        )
        store = MessageStore(config)
        await store.start()
        first = store.commit_log.queue.files[0]
        assert first.warmer is not None
        results = []
        for i in range(300):
            msg = MessageToStore(topic="T", queue_id=0, body=b"m%05d" % i + b"x" * 1000, properties={"KEYS": f"k{i}"})
            results.append(await store.put_message(msg))
        assert all(r.status is PutStatus.PUT_OK for r in results)
        await store.commit_log.allocator.ready()
        for _ in range(200):  # the warmer runs in the allocator's thread; give it time to reach the end
            if first.warmer.warmed_to >= first.file_size:
                break
            await asyncio.sleep(0.05)
        assert first.warmer.warmed_to == first.file_size
        bodies: list[bytes] = []
        while len(bodies) < 300:  # a pull returns at most 256 KiB
            got = store.get_message("G", "T", 0, len(bodies), 400)
            assert got.message_count > 0
            bodies += [m.body[:6] for m in decode_records(b"".join(got.buffers), verify_crc=True)]
            got.release()
        assert bodies == [b"m%05d" % i for i in range(300)]
        await store.shutdown()

    asyncio.run(scenario())


def _bytes_dirtied() -> int:
    """What this process has dirtied in the page cache so far (the kernel counts whole folios)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs the kernel's per-task I/O accounting")
@pytest.mark.parametrize("how", ["created warm", "warmed behind the writer"])
def test_a_store_into_a_zero_filled_file_dirties_a_small_folio(tmp_path: Path, how: str) -> None:
    # The folio a page-cache write creates is as large as the write (Linux 6.16+ ext4, XFS), and a store
    # through the mapping dirties, so a group commit writes back, the whole folio: ~2 MiB after a 1 MiB
    # zero-fill write. This is the accounting the kernel does when the folio turns dirty.
    if how == "created warm":
        mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE, warm=True)
    else:
        mf = MappedFile.create(tmp_path / f"{0:020d}", SIZE)
        FileWarmer(mf, margin=1 << 20, margin_min=4096).run()
    os.fdatasync(mf.fd)  # every zero-filled page clean
    before = _bytes_dirtied()
    spots = 16
    for n in range(spots):  # one small record every 64 KiB, in the warmed part
        at = (2 << 20) + n * (64 << 10)
        mf.mm[at : at + 100] = b"r" * 100
    dirtied = _bytes_dirtied() - before
    assert dirtied <= spots * (16 << 10), f"{dirtied} bytes of page cache dirtied by {spots} stores"
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
