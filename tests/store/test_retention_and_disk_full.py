"""Retention deletes only expired CommitLog files (never the active one); a full disk fails puts cleanly."""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.protocol.message import decode_record
from broker.store import GetStatus, MessageStore, PutStatus
from broker.store.retention import CleanService
from tests.store.store_helpers import dispatched, message, small_config


def test_retention_deletes_expired_files_but_never_the_active_one(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, file_reserved_time=1, delete_when="04"))
        await store.start()
        for i in range(800):
            await store.put(message(i, size=300))
        await asyncio.sleep(0.05)
        files = list(store.commit_log.queue.files)
        assert len(files) >= 5
        fake_now = (datetime.datetime.now() + datetime.timedelta(days=1)).replace(hour=4)
        old = fake_now.timestamp() - 2 * 3600
        young = fake_now.timestamp() - 600
        for mf in files:
            os.utime(mf.path, (young, young))
        for mf in files[:3]:
            os.utime(mf.path, (old, old))
        os.utime(files[-1].path, (old, old))  # the active file looks expired too: it must survive
        at = {"hour": 4}
        clean = CleanService(
            store.config,
            store.commit_log.queue,
            store._after_commit_log_delete,
            now=lambda: fake_now.replace(hour=at["hour"]),
            usage=lambda _p: 0.10,
        )
        at["hour"] = 5  # not a deleteWhen hour and no disk pressure: nothing happens
        assert await clean.run_once() == 0
        at["hour"] = 4
        assert await clean.run_once() == 3
        remaining = [mf.path.name for mf in store.commit_log.queue.files]
        assert remaining == [mf.path.name for mf in files[3:]]
        assert not files[0].path.exists() and files[-1].path.exists()
        assert store.min_phy_offset == files[3].file_from_offset
        # queue min offsets advanced past the deleted records; the first kept message is readable
        min_off = store.get_min_offset_in_queue("TopicTest", 0)
        assert min_off > 0
        assert store.get_message("g", "TopicTest", 0, 0, 1).status is GetStatus.OFFSET_TOO_SMALL
        got = store.get_message("g", "TopicTest", 0, min_off, 1)
        assert got.status is GetStatus.FOUND
        assert decode_record(got.buffers[0]).commit_log_offset >= files[3].file_from_offset
        got.release()
        # above the forcible ratio even young files go, still never the active one
        forced = CleanService(
            store.config, store.commit_log.queue, store._after_commit_log_delete, usage=lambda _p: 0.95
        )
        await forced.run_once()
        assert [mf.path.name for mf in store.commit_log.queue.files] == [files[-1].path.name]
        assert forced.disk_full
        await store.shutdown()

    asyncio.run(main())


def test_puts_are_refused_while_the_disk_is_above_the_warning_ratio(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's own clean service reads the usage (here given, as a full disk cannot be timed), and puts
    follow it both ways: DISK_FULL while it is high, accepted again once space is back."""

    async def main() -> None:
        store = MessageStore(small_config(tmp_path / "store", clean_resource_interval=600_000))
        await store.start()
        try:
            clean = store.clean_service
            assert clean is not None
            assert (await store.put(message(0))).ok
            clean.usage = lambda _p: 0.95
            await clean.run_once()
            assert (await store.put(message(1))).status is PutStatus.DISK_FULL
            assert (await store.put([message(2), message(3)])).status is PutStatus.DISK_FULL
            assert "disk usage 95%" in caplog.text and "puts are refused (DISK_FULL)" in caplog.text
            clean.usage = lambda _p: 0.10
            await clean.run_once()
            assert (await store.put(message(4))).ok
            assert "disk usage 10%" in caplog.text and "puts are taken again" in caplog.text
            await dispatched(store)
            assert store.get_max_offset_in_queue("TopicTest", 0) == 2  # nothing refused was stored
        finally:
            await store.shutdown()

    asyncio.run(main())


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs to simulate a full disk (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_fails_puts_cleanly(tiny_fs: Path) -> None:
    root = tiny_fs / "store"

    async def fill() -> list[tuple[str, int]]:
        store = MessageStore(
            small_config(root, mapped_file_size_commit_log=256 * 1024, clean_resource_interval=600_000)
        )
        await store.start()
        acked: list[tuple[str, int]] = []
        failures: list[PutStatus] = []
        for i in range(20_000):
            r = await store.put(message(i, size=900))
            if r.ok:
                acked.append((f"key-{i}", r.queue_offset))
            else:
                failures.append(r.status)
                if len(failures) >= 3:
                    break
        assert failures and set(failures) <= {PutStatus.DISK_FULL, PutStatus.CREATE_MAPPED_FILE_FAILED}, failures
        assert len(acked) > 100
        await asyncio.sleep(0.05)
        await store.shutdown()
        return acked

    acked = asyncio.run(fill())

    async def check() -> None:
        store = MessageStore(
            small_config(root, mapped_file_size_commit_log=256 * 1024, clean_resource_interval=600_000)
        )
        await store.start()
        assert store.get_max_offset_in_queue("TopicTest", 0) == len(acked)
        for key, off in acked:
            got = store.get_message("g", "TopicTest", 0, off, 1)
            assert got.status is GetStatus.FOUND
            assert decode_record(got.buffers[0], verify_crc=True).properties["KEYS"] == key
            got.release()
        await store.shutdown()

    asyncio.run(check())


def _fill_disk(directory: Path, name: str) -> Path:
    """Take every free byte of the (tmpfs) file system with one preallocated file."""
    path = directory / name
    free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, free)
    finally:
        os.close(fd)
    return path


def test_consume_queue_without_space_never_skips_an_acknowledged_message(tiny_fs: Path) -> None:
    """A real full disk when a queue needs its first file: the prepared spare CommitLog file is given up
    first; without one, dispatch stops at that message (no blank unit in its place) and resumes by
    itself once space is back."""

    async def main() -> None:
        store = MessageStore(small_config(tiny_fs / "store", mapped_file_size_commit_log=256 * 1024))
        await store.start()
        try:
            await store.commit_log.allocator.ready()  # the spare next CommitLog file exists
            fillers = [_fill_disk(tiny_fs, "filler-1")]
            put = await store.put(message(0, topic="Rescued"))
            assert put.ok  # into the current CommitLog file: no new space needed
            await _until(lambda: store.get_max_offset_in_queue("Rescued", 0) == 1)  # the spare made room

            fillers.append(_fill_disk(tiny_fs, "filler-2"))  # and now nothing is left to give up
            for i in range(3):
                assert (await store.put(message(i, topic="Stalled"))).ok
            await asyncio.sleep(0.3)
            assert store.get_max_offset_in_queue("Stalled", 0) == 0  # not dispatched, and not skipped
            assert store.dispatch_behind_bytes > 0

            for path in fillers:
                path.unlink()
            await _until(lambda: store.get_max_offset_in_queue("Stalled", 0) == 3, timeout=5.0)
            for i in range(3):
                got = store.get_message("g", "Stalled", 0, i, 1)
                assert got.status is GetStatus.FOUND
                assert decode_record(got.buffers[0]).properties["KEYS"] == f"key-{i}"
                got.release()
        finally:
            await store.shutdown()

    asyncio.run(main())


async def _until(check: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)
