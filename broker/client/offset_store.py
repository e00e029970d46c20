"""Consumer offset stores: the broker's (clustering) and a local file (broadcasting).

The consumers call `update()` as messages are consumed (the push consumer's consume services, the
pull consumer's poll()), and their group membership (membership.py) calls `persist_all()` every
persistConsumerOffsetInterval and at shutdown (and the pull consumer's commit()); `read()` gives
the starting offset (-1 when nothing is stored, which rebalance turns into a consumeFromWhere
decision). Both keep the authoritative table in memory; only where it is saved
differs.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable

from broker.client.errors import QueryNotFound
from broker.client.message import MessageQueue

__all__ = ["LocalFileOffsetStore", "OffsetStore", "ReadOffsetType", "RemoteBrokerOffsetStore"]

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "memory"
    READ_FROM_STORE = "store"
    MEMORY_FIRST_THEN_STORE = "memory-then-store"


class OffsetStore:
    """The in-memory table shared by both stores."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        """Record `offset` as the next one to consume. `increase_only` protects against a late,
        smaller commit from an older consume round overwriting progress."""
        if offset < 0:
            return
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    async def read(self, mq: MessageQueue, mode: ReadOffsetType = ReadOffsetType.MEMORY_FIRST_THEN_STORE) -> int:
        if mode is not ReadOffsetType.READ_FROM_STORE:
            offset = self.table.get(mq)
            if offset is not None or mode is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if offset is None else offset
        stored = await self._read_stored(mq)
        if stored >= 0:
            self.update(mq, stored)
        return stored

    async def _read_stored(self, mq: MessageQueue) -> int:
        raise NotImplementedError

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        raise NotImplementedError

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets live on the broker (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET)."""

    def __init__(
        self,
        fetch: Callable[[MessageQueue], Awaitable[int]],
        commit: Callable[[MessageQueue, int], Awaitable[None]],
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self._commit = commit
        # What the broker last got from us: unchanged offsets are not re-sent every 5 s.
        self._sent: dict[MessageQueue, int] = {}

    async def _read_stored(self, mq: MessageQueue) -> int:
        try:
            return await self._fetch(mq)
        except QueryNotFound:
            return -1

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in list(mqs):
            offset = self.table.get(mq)
            if offset is None or self._sent.get(mq) == offset:
                continue
            try:
                await self._commit(mq, offset)
                self._sent[mq] = offset
            except Exception as exc:  # one unreachable broker must not stop the others' commits
                log.warning("committing offset %d of %s failed: %s", offset, mq, exc)

    def remove(self, mq: MessageQueue) -> None:
        super().remove(mq)
        self._sent.pop(mq, None)


class LocalFileOffsetStore(OffsetStore):
    """Offsets in `<dir>/<clientId>/<group>/offsets.json`, written atomically (temp file + rename)."""

    def __init__(self, directory: str, client_id: str, group: str) -> None:
        super().__init__()
        safe_client = client_id.replace(os.sep, "_").replace(":", "_")
        self.path = os.path.join(directory, safe_client, group, "offsets.json")

    async def load(self) -> None:
        self.table.update(self._load_file())

    def _load_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
                return {
                    MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"])
                    for e in data.get("offsets", [])
                }
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("offset file %s is unreadable (%s); trying the backup", path, exc)
        return {}

    async def _read_stored(self, mq: MessageQueue) -> int:
        return self._load_file().get(mq, -1)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        # Keep offsets of queues not currently assigned too: broadcasting consumers own all queues,
        # and a temporarily missing route must not erase progress.
        table = {**self._load_file(), **{mq: off for mq, off in self.table.items() if mq in wanted}}
        self._write(table)

    def _write(self, table: dict[MessageQueue, int]) -> None:
        entries = [{**mq.to_json(), "offset": off} for mq, off in sorted(table.items())]
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".offsets.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"offsets": entries}, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            if os.path.exists(self.path):
                os.replace(self.path, self.path + ".bak")
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
