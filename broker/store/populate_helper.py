"""The page populator's helper process (see broker.store.populate): faults CommitLog pages into the page
cache ahead of the broker's writer.

Run as a script (`python populate_helper.py`), with the standard library only, so it starts in tens of
milliseconds and stays small. It reads lines `<file path>\\t<write position>` from stdin, keeps the newest,
and brings [position, position + AHEAD) into the page cache, continuing into the next CommitLog file when
the allocator has created it. It exits when stdin closes: the broker stopped or died.

It runs under SCHED_IDLE: only CPU nobody else wants. Populating reads: the helper maps each step
copy-on-write from a read-only descriptor, so it cannot write to the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import select
import sys

__all__ = ["AHEAD", "main", "populate_ahead"]

AHEAD = 32 << 20  # how far ahead of the writer pages are brought in (~0.2 s of writes at 150 MB/s)
STEP = 1 << 20  # bytes per call: a short-lived mapping each, so this process's resident size stays small
PAGE = mmap.ALLOCATIONGRANULARITY
MADV_POPULATE_READ = 22  # <linux/mman.h>, Linux >= 5.14

_libc = ctypes.CDLL(None, use_errno=True)
_madvise = _libc.madvise
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_madvise.restype = ctypes.c_int
_populate_read = True  # until the kernel says it does not know MADV_POPULATE_READ


def populate_ahead(path: str, wrote: int, done: dict[str, int], ahead: int = AHEAD) -> int:
    """Bring [wrote, wrote + ahead) of the CommitLog file at `path` into the page cache, continuing into
    the next file (named by its start offset) when it exists. `done` remembers per file how far that
    happened already. Returns the bytes requested now."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0  # deleted meanwhile (retention, truncation)
    end = wrote + ahead
    end += -end % PAGE
    requested = _advise(path, max(wrote - wrote % PAGE, done.get(path, 0)), min(size, end), done)
    if end > size:
        directory, name = os.path.split(path)
        if name.isdigit():
            following = os.path.join(directory, f"{int(name) + size:020d}")
            requested += _advise(following, done.get(following, 0), min(size, end - size), done)
    return requested


def _advise(path: str, start: int, end: int, done: dict[str, int]) -> int:
    if end <= start:
        return 0
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0  # not created yet, or deleted
    try:
        pos = start
        while pos < end:
            n = min(STEP, end - pos)
            _populate(fd, pos, n)
            pos += n
    finally:
        os.close(fd)
    done[path] = end
    return end - start


def _populate(fd: int, pos: int, size: int) -> None:
    """Fault [pos, pos + size) of the file into the page cache (pos page-aligned)."""
    global _populate_read
    if _populate_read:
        try:
            view = mmap.mmap(fd, size, access=mmap.ACCESS_COPY, offset=pos)
        except (OSError, ValueError):
            return  # the file is shorter than we were told (cut meanwhile)
        with view:
            anchor = ctypes.c_char.from_buffer(view)
            try:
                failed = _madvise(ctypes.addressof(anchor), size, MADV_POPULATE_READ) != 0
                err = ctypes.get_errno() if failed else 0
            finally:
                del anchor
        if err != errno.EINVAL:
            return  # done, or EFAULT/EIO on a file cut meanwhile: nothing to do
        _populate_read = False  # Linux < 5.14: the kernel's read-ahead does part of it
    os.posix_fadvise(fd, pos, size, os.POSIX_FADV_WILLNEED)


def _newest(fd: int, pending: bytes) -> tuple[bytes, str | None, bool]:
    """Read what the pipe holds; returns (unfinished tail, newest whole line, pipe closed)."""
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"", None, True
        pending += chunk
    *lines, tail = pending.split(b"\n")
    return tail, (lines[-1].decode(errors="replace") if lines else None), False


def main() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)  # the closest thing elsewhere
    fd = sys.stdin.fileno()
    pending = b""
    done: dict[str, int] = {}
    while True:
        select.select([fd], [], [])  # wait for a position, or the end of the pipe
        pending, line, closed = _newest(fd, pending)
        if closed:
            return
        if line is None:
            continue
        path, _, wrote = line.partition("\t")
        if wrote.isdigit() and len(wrote) < 20:
            # a path it cannot use is skipped (the broker only sends its own files)
            with contextlib.suppress(OSError, ValueError):
                populate_ahead(path, int(wrote), done)
        while len(done) > 4:  # forget old files
            del done[min(done)]


if __name__ == "__main__":
    main()
