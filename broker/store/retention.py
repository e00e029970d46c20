"""The clean service: deletes expired CommitLog files and what points into them.

Started by MessageStore (broker.store.message_store); one task that wakes every cleanResourceInterval ms.
A CommitLog file older than fileReservedTime hours is deleted at a `deleteWhen` hour, or at any hour when
disk usage is above diskMaxUsedSpaceRatio; above diskSpaceCleanForciblyRatio the oldest files go even if
they are young. The active (last) file is never deleted. Afterwards ConsumeQueue files and index files
that only point below the new CommitLog minimum are removed and queue min offsets advance.
Deletion (unlink of up to 1 GiB) runs in a worker thread.

Every deletion is logged with the CommitLog offsets it removed. A forced clean (disk at or above
diskSpaceCleanForciblyRatio) is a WARNING that says so, with the disk ratio and how many of the files were
still inside fileReservedTime: their messages are gone whether or not consumers had pulled them, and an
operator must be able to tell that from expiry (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
from collections.abc import Callable
from pathlib import Path

from broker.store.config import StoreConfig
from broker.store.mapped_file_queue import MappedFileQueue

MAX_FILES_PER_PASS = 10

__all__ = ["CleanService", "disk_space", "disk_usage_ratio"]

log = logging.getLogger(__name__)

DISK_WARNING_RATIO = 0.90  # diskSpaceWarningLevelRatio: above it puts are refused (DISK_FULL)


def disk_space(path: Path) -> tuple[int, int]:
    """Used and usable bytes of the filesystem holding `path`, as `df` counts them: usable is used + available.

    Blocks reserved for root are neither: counting them as used (1 - avail/total) reads 80% on a disk
    that `df` shows 45% full, and would refuse puts long before the disk is really full.
    """
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return used, used + st.f_bavail * st.f_frsize


def disk_usage_ratio(path: Path) -> float:
    """Used fraction of the filesystem holding `path`, as `df` counts it (see `disk_space`)."""
    used, usable = disk_space(path)
    return used / usable if usable else 0.0


class CleanService:
    def __init__(
        self,
        config: StoreConfig,
        queue: MappedFileQueue,
        after_delete: Callable[[int], None],
        *,
        now: Callable[[], datetime.datetime] = datetime.datetime.now,
        usage: Callable[[Path], float] = disk_usage_ratio,
        on_disk_full_change: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.queue = queue
        self.after_delete = after_delete  # called on the loop with the new CommitLog min offset
        self.now = now
        self.usage = usage
        self.disk_full = False  # above the warning ratio: the store refuses puts
        self.on_disk_full_change = on_disk_full_change  # told when disk_full flips
        self.manual_delete = False  # set by an admin command: delete expired files now, whatever the hour
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="store-clean")

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        interval = self.config.clean_resource_interval / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)
            if self._stop.is_set():
                return
            try:
                await self.run_once()
            except OSError:
                log.exception("cleaning expired CommitLog files failed")

    async def run_once(self) -> int:
        """One pass; returns how many CommitLog files were deleted."""
        loop = asyncio.get_running_loop()
        ratio = await loop.run_in_executor(None, self.usage, self.queue.directory)
        disk_full = ratio >= DISK_WARNING_RATIO
        if disk_full != self.disk_full:
            self.disk_full = disk_full
            if disk_full:
                log.error(
                    "disk usage %.0f%% of %s is above %.0f%%: puts are refused (DISK_FULL) until it is not",
                    ratio * 100,
                    self.queue.directory,
                    DISK_WARNING_RATIO * 100,
                )
            else:
                log.warning("disk usage %.0f%% of %s: puts are taken again", ratio * 100, self.queue.directory)
            if self.on_disk_full_change is not None:
                self.on_disk_full_change()
        space_pressure = ratio >= self.config.disk_max_used_space_ratio / 100
        forcibly = ratio >= self.config.disk_space_clean_forcibly_ratio
        time_to_delete = self.now().hour in self.config.delete_hours()
        if not (time_to_delete or space_pressure or self.manual_delete):
            return 0
        if space_pressure:
            log.warning(
                "disk usage %.0f%% of %s: deleting expired CommitLog files now", ratio * 100, self.queue.directory
            )
        expired_ms = int(self.config.file_reserved_time * 3_600_000)
        now_ms = int(self.now().timestamp() * 1000)
        # The candidates in deletion order, seen before they go: which were still young is said afterwards.
        candidates = [mf.last_modified_ms for mf in self.queue.files[:-1][:MAX_FILES_PER_PASS]]
        min_before = self.queue.min_offset
        deleted = await loop.run_in_executor(
            None,
            lambda: self.queue.delete_expired_files_by_time(
                expired_ms, clean_immediately=forcibly, max_files=MAX_FILES_PER_PASS, now_ms=now_ms
            ),
        )
        self.manual_delete = False
        if deleted:
            young = sum(1 for modified in candidates[:deleted] if now_ms < modified + expired_ms)
            self._log_deletion(deleted, young, min_before, self.queue.min_offset, ratio, forcibly)
            self.after_delete(self.queue.min_offset)
        return deleted

    def _log_deletion(self, deleted: int, young: int, start: int, end: int, ratio: float, forcibly: bool) -> None:
        hours = self.config.file_reserved_time
        if not forcibly:
            log.info(
                "deleted %d expired CommitLog files (older than fileReservedTime %g h): CommitLog offsets [%d, %d)",
                deleted, hours, start, end,
            )  # fmt: skip
            return
        log.warning(
            "forced clean: disk usage %.0f%% of %s is at or above diskSpaceCleanForciblyRatio %.0f%%: deleted %d "
            "CommitLog files, %d of them younger than fileReservedTime %g h; CommitLog offsets [%d, %d) are gone, "
            "with every message stored there, acknowledged or not, that a consumer had not pulled",
            ratio * 100, self.queue.directory, self.config.disk_space_clean_forcibly_ratio * 100, deleted, young,
            hours, start, end,
        )  # fmt: skip
