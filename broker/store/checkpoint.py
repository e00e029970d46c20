"""The `checkpoint` file (StoreCheckpoint): timestamps of what is known to be on disk, 4096 bytes.

Written by the flush services (broker.store.flush) and MessageStore.shutdown; read by recovery
(broker.store.recovery) to choose where a crash scan starts. Layout (reference 5.4): physicMsgTimestamp,
logicsMsgTimestamp, indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset (int64 each, big-endian).
RocketCluster adds, past RocketMQ's fields (which RocketMQ ignores): at 40 a clean-shutdown marker and
at 48 the CommitLog end offset at that shutdown, so a clean restart needs no scan.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

__all__ = ["CHECKPOINT_SIZE", "StoreCheckpoint"]

log = logging.getLogger(__name__)

CHECKPOINT_SIZE = 4096
_LAYOUT = struct.Struct(">qqqqqqq")
_CLEAN_MAGIC = int.from_bytes(b"RCKTCLN1", "big", signed=True)


class StoreCheckpoint:
    """In-memory fields plus `flush()` (blocking pwrite + fdatasync; call it from an executor)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self.clean_shutdown_offset = -1  # CommitLog end at the last clean shutdown, -1 when unknown
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, _LAYOUT.size, 0)
        if len(raw) == _LAYOUT.size:
            (
                self.physic_msg_timestamp,
                self.logics_msg_timestamp,
                self.index_msg_timestamp,
                self.master_flushed_offset,
                self.confirm_phy_offset,
                magic,
                clean_offset,
            ) = _LAYOUT.unpack(raw)
            self.clean_shutdown_offset = clean_offset if magic == _CLEAN_MAGIC else -1
        if os.fstat(self._fd).st_size < CHECKPOINT_SIZE:
            os.ftruncate(self._fd, CHECKPOINT_SIZE)

    def min_timestamp(self, *, with_index: bool) -> int:
        """Where a crash scan may start: everything stored before this is in the CommitLog and its queues."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if with_index:
            ts = min(ts, self.index_msg_timestamp)
        return ts

    def flush(self) -> None:
        """Write all fields and fdatasync (blocking)."""
        clean = self.clean_shutdown_offset >= 0
        data = _LAYOUT.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
            _CLEAN_MAGIC if clean else 0,
            self.clean_shutdown_offset if clean else -1,
        )
        os.pwrite(self._fd, data, 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
