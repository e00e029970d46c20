"""Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

The lock processor calls `try_lock_batch` / `unlock_batch`; CONSUMER_SEND_MSG_BACK asks
`group_holds_locks` (orderly groups send retries straight to the DLQ). A lock is owned by a clientId
and expires 60 s after its last renewal; clients renew every 20 s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from broker.protocol.bodies import MessageQueue

__all__ = ["LOCK_MAX_LIVE_SECONDS", "RebalanceLockManager"]

log = logging.getLogger(__name__)

LOCK_MAX_LIVE_SECONDS = 60.0


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update: float


class RebalanceLockManager:
    def __init__(self, max_live: float = LOCK_MAX_LIVE_SECONDS) -> None:
        self.max_live = max_live
        self._table: dict[str, dict[MessageQueue, _Lock]] = {}

    def try_lock_batch(
        self, group: str, mqs: list[MessageQueue], client_id: str, now: float | None = None
    ) -> list[MessageQueue]:
        """Grant each queue that is free, expired, or already ours; returns the granted ones."""
        now = time.monotonic() if now is None else now
        locks = self._table.setdefault(group, {})
        granted = []
        for mq in mqs:
            lock = locks.get(mq)
            if lock is None or lock.client_id == client_id or now - lock.last_update > self.max_live:
                if lock is not None and lock.client_id != client_id:
                    log.info(
                        "lock of %s in group %s expired for %s; granted to %s", mq, group, lock.client_id, client_id
                    )
                locks[mq] = _Lock(client_id, now)
                granted.append(mq)
        return granted

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        locks = self._table.get(group)
        if not locks:
            return
        for mq in mqs:
            lock = locks.get(mq)
            if lock is not None and lock.client_id == client_id:
                del locks[mq]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        lock = self._table.get(group, {}).get(mq)
        return lock is not None and lock.client_id == client_id and now - lock.last_update <= self.max_live

    def group_holds_locks(self, group: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return any(now - lock.last_update <= self.max_live for lock in self._table.get(group, {}).values())
