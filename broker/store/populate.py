"""Faults the active CommitLog file's pages into the page cache ahead of its writer, from a helper process.

Why: a fallocated CommitLog file has no pages in the page cache, so the writer (the event loop) takes a
page fault every 4 KiB, and on this kind of VM a page the guest has not used lately costs ~8-11 us: the
host backs guest memory on first touch, and free page reporting hands freed memory back to it. That is
~2 us per KiB written, a quarter of an in-process put (docs/design/performance-log.md, Session 5). Faulting the pages
in ahead (`MADV_POPULATE_READ`: for the unwritten extents of a fallocated file the kernel only allocates
zeroed pages, no disk read) moves that cost off the event loop; the writer then takes only the cheap
fault that maps a cached page writable (11 -> 0.9 us a page measured here).

Why a process and not a thread: a thread takes the GIL between its calls, and on two cores its kernel
work competes with the event loop and the clients (measured: the event loop idled 11% waiting, and
sends got slower). The helper (broker.store.populate_helper) runs under SCHED_IDLE, so it only uses CPU
nobody else wants, and holds nothing the broker needs: on a saturated machine it lags and the writer
faults its pages itself, as without it.

The broker reports where the writer is whenever it moved MIN_REPORT bytes (looked at every POLL_S), a
line on a non-blocking pipe (a full pipe drops the update); closing the pipe stops the helper, also when
the broker dies.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

from broker.logs.relay import Relay
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.populate_helper import AHEAD

__all__ = ["MIN_FILE_SIZE", "PagePopulator"]

log = logging.getLogger(__name__)

POLL_S = 0.01  # how often the writer's position is looked at (it moves < 2 MiB meanwhile)
# A smaller move is not reported: each report wakes the helper (a cross-CPU wake-up; py-spy put a report
# every 10 ms at 0.5-0.8% of the event loop); the helper stays >= AHEAD - MIN_REPORT ahead.
MIN_REPORT = 4 << 20
MIN_FILE_SIZE = 4 * AHEAD  # smaller CommitLog files (tests) are not worth a helper process
_HELPER = Path(__file__).with_name("populate_helper.py")


class PagePopulator:
    """Broker side: starts the helper and reports the position of `queue`'s writer to it."""

    def __init__(self, queue: MappedFileQueue) -> None:
        self.queue = queue
        self._proc: subprocess.Popen[bytes] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._sent: tuple[str, int] = ("", -1)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the helper (call on the event loop)."""
        # It logs nothing; whatever it writes on stderr (a traceback) goes through the broker's log handlers
        log_read, log_write = os.pipe()
        try:
            # -I -S: the standard library only, no site packages: it starts in tens of milliseconds
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_HELPER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log_write,
            )
        except OSError as exc:  # the broker works without it, only slower
            os.close(log_read)
            log.warning("page populator not started: %s", exc)
            return
        finally:
            os.close(log_write)
        Relay(os.fdopen(log_read, "rb"), "populate-helper")
        assert self._proc.stdin is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        self._timer = asyncio.get_running_loop().call_later(POLL_S, self._report)

    def _report(self) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        files = self.queue.files
        if files:
            mf = files[-1]
            path, wrote = str(mf.path), mf.wrote_position
            last_path, last_wrote = self._sent
            if path != last_path or wrote - last_wrote >= MIN_REPORT:
                try:
                    os.write(proc.stdin.fileno(), f"{path}\t{wrote}\n".encode())
                    self._sent = (path, wrote)
                except BlockingIOError:
                    pass  # the helper lags (a busy machine): it gets a newer position next time
                except OSError:  # it is gone (killed by hand, say): carry on without it
                    log.warning("page populator exited (%s); the writer faults CommitLog pages in itself", proc.poll())
                    self._proc = None
                    return
        self._timer = asyncio.get_running_loop().call_later(POLL_S, self._report)

    def stop(self) -> None:
        """Close the pipe (the helper exits) and reap it. Blocks up to a second: run in an executor."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(1.0)
        except subprocess.TimeoutExpired:  # SCHED_IDLE on a saturated machine: do not wait for its turn
            proc.kill()
            proc.wait()
