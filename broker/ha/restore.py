"""A master's CommitLog restored from one of its slaves, before the master serves.

Called once at start by the broker's start-up check (broker.server.restore), after the store recovered and
before the HA server binds: a slave holds more of the group's CommitLog than this master (its store was
lost or replaced). `restore_commit_log` replicates from the slave's restore source (broker.ha.restore_source)
with the slave's own replication client in its one-shot mode (`HAClient.replicate_once`), then dispatches
the restored records into the ConsumeQueues and makes new puts continue every queue after them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.ha.settings import HASettings
from broker.ha.slave import HAClient

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["RestoreResult", "adopt_queue_offsets", "restore_commit_log"]

log = logging.getLogger(__name__)

ATTEMPTS = 3  # sessions tried while each one still brings data
DISPATCH_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class RestoreResult:
    source: str  # the slave's HA address
    start: int  # the local CommitLog end before
    end: int  # and after
    target: int  # the slave's end when asked
    seconds: float
    diverged: str | None = None  # why the slave's stream did not continue the local CommitLog

    @property
    def restored_bytes(self) -> int:
        return self.end - self.start

    @property
    def complete(self) -> bool:
        return self.end >= self.target


async def restore_commit_log(store: MessageStore, settings: HASettings, source: str, until: int) -> RestoreResult:
    """Replicate from the restore source at `source` until the local CommitLog ends at `until` (or the
    source stops giving data); the restored records are dispatched before this returns."""
    started = time.monotonic()
    start = store.max_phy_offset
    client = HAClient(store, settings, lambda: source)
    for _attempt in range(ATTEMPTS):
        before = store.max_phy_offset
        if await client.replicate_once(source, until) or client.diverged or store.max_phy_offset == before:
            break
    if store.max_phy_offset > start:
        await adopt_queue_offsets(store)
    return RestoreResult(source, start, store.max_phy_offset, until, time.monotonic() - started, client.diverged)


async def adopt_queue_offsets(store: MessageStore) -> None:
    """Dispatch every replicated record, then continue each queue's offsets after them (without this, a put
    after a restore would reuse queue offsets the restored records hold)."""
    left = await store.adopt_replicated(DISPATCH_WAIT_S)
    if left > 0:
        log.error("HA restore: %d restored bytes are not dispatched yet", left)
