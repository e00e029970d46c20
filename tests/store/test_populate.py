"""CommitLog pages faulted in ahead of the writer by a helper process (broker.store.populate), and the
writer's own page-table entries dropped before a flush (MappedFile.unmap_written).

Real files, a real helper process, real page-cache residency (mincore) and the process's own page
tables (/proc/self/smaps); the parent's death is a real kill -9.
"""

from __future__ import annotations

import asyncio
import ctypes
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from broker.store import MessageStore, PutStatus
from broker.store.mapped_file import MappedFile, file_name_for
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.populate import MIN_FILE_SIZE, PagePopulator
from broker.store.populate_helper import populate_ahead
from tests.store.store_helpers import message, process_gone, small_config, wait_for

PAGE = mmap.PAGESIZE
MIB = 1 << 20
HELPER = Path(__file__).parents[2] / "broker" / "store" / "populate_helper.py"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


def resident(path: Path, start: int, end: int) -> float:
    """Share of the pages of [start, end) of the file that are in the page cache (mincore)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, end - start, access=mmap.ACCESS_COPY, offset=start) as view:
            anchor = ctypes.c_char.from_buffer(view)
            pages = (end - start + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            try:
                assert _libc.mincore(ctypes.addressof(anchor), end - start, vec) == 0, ctypes.get_errno()
            finally:
                del anchor
            return sum(b & 1 for b in vec) / pages
    finally:
        os.close(fd)


def fresh_file(directory: Path, offset: int, size: int) -> Path:
    """A fallocated file with no page in the page cache, like a new CommitLog file."""
    path = directory / file_name_for(offset)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


def test_populate_ahead_brings_the_window_after_the_writer_into_the_page_cache(tmp_path: Path) -> None:
    path = fresh_file(tmp_path, 0, 16 * MIB)
    assert resident(path, 4 * MIB, 12 * MIB) < 0.5
    done: dict[str, int] = {}
    assert populate_ahead(str(path), 4 * MIB + 100, done, ahead=8 * MIB) == 8 * MIB + PAGE
    assert resident(path, 4 * MIB, 12 * MIB) == 1.0
    # the same window again costs nothing; a writer that moved on gets only the new part
    assert populate_ahead(str(path), 4 * MIB + 100, done, ahead=8 * MIB) == 0
    assert populate_ahead(str(path), 5 * MIB, done, ahead=8 * MIB) == MIB - PAGE
    assert resident(path, 12 * MIB, 13 * MIB) == 1.0


def test_populate_ahead_continues_into_the_next_file_once_it_exists(tmp_path: Path) -> None:
    size = 8 * MIB
    first = fresh_file(tmp_path, 0, size)
    done: dict[str, int] = {}
    # the allocator has not created the next file yet: only this one's end, and no error
    assert populate_ahead(str(first), 6 * MIB, done, ahead=4 * MIB) == 2 * MIB
    following = fresh_file(tmp_path, size, size)
    assert populate_ahead(str(first), 6 * MIB, done, ahead=4 * MIB) == 2 * MIB
    assert resident(following, 0, 2 * MIB) == 1.0


def test_populate_ahead_reads_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / file_name_for(0)
    data = os.urandom(4 * MIB)
    path.write_bytes(data)
    os.chmod(path, 0o444)  # the helper opens read-only: a read-only file is enough
    assert populate_ahead(str(path), 0, {}, ahead=4 * MIB) == 4 * MIB
    assert path.read_bytes() == data


def test_populate_ahead_of_a_deleted_file_does_nothing(tmp_path: Path) -> None:
    assert populate_ahead(str(tmp_path / file_name_for(0)), 0, {}, ahead=MIB) == 0


def _helper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-I", "-S", str(HELPER)], stdin=subprocess.PIPE)


def test_the_helper_survives_garbage_on_its_pipe_and_exits_when_it_closes(tmp_path: Path) -> None:
    path = fresh_file(tmp_path, 0, 64 * MIB)
    proc = _helper()
    assert proc.stdin is not None
    hostile = [
        b"no tab here\n",
        b"/etc/passwd\tnot-a-number\n",
        b"\t\n",
        b"\xff\xfe\x00binary\tgarbage\n",
        b"/tmp/\x00nul\t42\n",
        b"/nonexistent/00000000000000000000\t0\n",
        f"{path}\t-5\n".encode(),
        f"{path}\t{10**30}\n".encode(),
        b"x" * 200_000 + b"\n",  # longer than one read of the pipe
        f"{path}\t123".encode(),  # no newline yet: waits for the rest
    ]
    for line in hostile:  # one at a time, so that each is the newest line the helper reads
        proc.stdin.write(line)
        proc.stdin.flush()
        time.sleep(0.05)
        assert proc.poll() is None, line
    proc.stdin.write(b"4567\n")  # completes the last line: position 1234567
    proc.stdin.flush()
    assert wait_for(lambda: resident(path, MIB, 32 * MIB) == 1.0), "the helper stopped populating"
    assert proc.poll() is None
    proc.stdin.close()
    assert proc.wait(10) == 0


def test_the_helper_exits_when_the_broker_is_killed(tmp_path: Path) -> None:
    # a "broker" that starts a populator, prints the helper's pid and sleeps, then dies by SIGKILL
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from broker.store.mapped_file_queue import MappedFileQueue
        from broker.store.populate import PagePopulator

        async def main():
            populator = PagePopulator(MappedFileQueue(Path({str(tmp_path)!r}), 1 << 20))
            populator.start()
            print(populator.pid, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    helper_pid = int(parent.stdout.readline())
    assert Path(f"/proc/{helper_pid}").exists()
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    # orphaned, the helper is reparented to init, which reaps it once it exits
    assert wait_for(lambda: process_gone(helper_pid)), "the helper outlived its broker"


def test_the_populator_follows_the_writer_of_a_queue(tmp_path: Path) -> None:
    async def run() -> None:
        size = 64 * MIB
        fresh_file(tmp_path, 0, size)
        queue = MappedFileQueue(tmp_path, size)
        assert queue.load()
        mf = queue.files[0]
        populator = PagePopulator(queue)
        populator.start()
        try:
            mf.wrote_position = 20 * MIB  # the writer moved: the next look (every POLL_S) reports it
            ok = await asyncio.to_thread(wait_for, lambda: resident(mf.path, 20 * MIB, 52 * MIB) == 1.0)
            assert ok, "pages ahead of the writer were not populated"
        finally:
            populator.stop()
            queue.close()
        assert populator.pid is None

    asyncio.run(run())


@pytest.mark.parametrize(
    ("flush", "size", "helper"),
    [
        ("ASYNC_FLUSH", MIN_FILE_SIZE, True),
        ("ASYNC_FLUSH", MIN_FILE_SIZE // 2, False),  # small files (tests): not worth a process
        ("SYNC_FLUSH", MIN_FILE_SIZE, False),  # zero-filled files are in the page cache already
    ],
)
def test_a_store_runs_the_helper_only_for_large_fallocated_files(
    tmp_path: Path, flush: str, size: int, helper: bool
) -> None:
    async def run() -> None:
        store = MessageStore(small_config(tmp_path, mapped_file_size_commit_log=size, flush_disk_type=flush))
        await store.start()
        pid = store.populator.pid if store.populator is not None else None
        assert (pid is not None) == helper
        assert (await store.put(message(1))).status is PutStatus.PUT_OK
        await store.shutdown()
        if pid is not None:
            assert not Path(f"/proc/{pid}").exists(), "shutdown did not reap the helper"

    asyncio.run(run())


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mapping of `path` (its own page-table entries), from smaps."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            for detail in lines[i + 1 :]:
                if detail.startswith("Rss:"):
                    return int(detail.split()[1])
    raise AssertionError(f"{path} is not mapped")


def test_unmap_written_drops_the_writers_mapping_and_keeps_every_byte(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name_for(0), 8 * MIB)
    data = os.urandom(3 * MIB + 100)
    assert mf.append_bytes(data)
    assert _mapped_kib(mf.path) >= 3 * 1024
    mf.unmap_written()
    # the whole pages written are no longer mapped here; the partly written last page still is
    assert _mapped_kib(mf.path) <= 4
    assert mf.unmapped_to == 3 * MIB
    # still dirty in the page cache, readable through the mapping, and written on by the writer
    more = os.urandom(MIB)
    assert mf.append_bytes(more)
    view = mf.select(0)
    assert view is not None and bytes(view) == data + more
    view.release()
    mf.flush()
    mf.unmap_written()
    mf.close()
    assert (tmp_path / file_name_for(0)).read_bytes()[: len(data) + len(more)] == data + more


def test_a_flush_unmaps_the_written_pages_first(tmp_path: Path) -> None:
    async def run() -> None:
        store = MessageStore(small_config(tmp_path, mapped_file_size_commit_log=4 * MIB))
        await store.start()
        for i in range(2000):
            assert (await store.put(message(i, size=1000))).status is PutStatus.PUT_OK
        mf = store.commit_log.queue.files[-1]
        for _ in range(400):  # flush_interval_commit_log is 50 ms here; a loaded disk may take longer
            if mf.flushed_position > 0:
                break
            await asyncio.sleep(0.025)
        assert mf.unmapped_to >= mf.flushed_position - PAGE > 0
        for i in range(2000):  # every message reads back after its pages were unmapped
            got = store.get_message("g", "TopicTest", 0, i, 1)
            assert got.message_count == 1
            got.release()
        await store.shutdown()

    asyncio.run(run())
