"""Consumer offsets: `topic@group` -> {queueId: offset}, persisted to consumerOffset.json.

The offset processor (QUERY/UPDATE_CONSUMER_OFFSET), the pull processor (COMMIT_OFFSET flag) and
admin requests call this; `BrokerController` runs `flush_periodically()` every
`flushConsumerOffsetInterval` and calls `persist()` at shutdown. The file is read and written by the
store's `load_consumer_offsets` / `save_consumer_offsets` (broker.store.config_files), in RocketMQ 4.9's
shape, which 4.9 and 5.x brokers both read.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from broker.store.config_files import load_consumer_offsets, save_consumer_offsets

__all__ = ["ConsumerOffsetManager"]

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    """In-memory offset table with periodic, atomic persistence."""

    def __init__(self, config_dir: Path) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.path = config_dir / "consumerOffset.json"
        self._dirty = False

    def load(self) -> None:
        for key, queues in (load_consumer_offsets(self.path) or {}).items():
            if TOPIC_GROUP_SEPARATOR in key:
                self.table[key] = queues
        log.info("loaded consumer offsets of %d topic@group pairs", len(self.table))

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when none is stored."""
        queues = self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        return {
            k.split(TOPIC_GROUP_SEPARATOR, 1)[1] for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic
        }

    def topics_of_group(self, group: str) -> set[str]:
        return {
            k.split(TOPIC_GROUP_SEPARATOR, 1)[0] for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group
        }

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
            del self.table[key]
            self._dirty = True

    def remove_group(self, group: str) -> int:
        """Drop every offset `group` committed (DELETE_SUBSCRIPTIONGROUP with cleanOffset); how many topics."""
        keys = [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]
        for key in keys:
            del self.table[key]
        self._dirty = self._dirty or bool(keys)
        return len(keys)

    def clone(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Copy `src_group`'s offsets on `topic` to `dest_group` (CLONE_GROUP_OFFSET); False when it has none."""
        queues = self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{src_group}")
        if queues is None:
            return False
        self.table[f"{topic}{TOPIC_GROUP_SEPARATOR}{dest_group}"] = dict(queues)
        self._dirty = True
        return True

    def snapshot(self) -> dict[str, Any]:
        """The body of GET_ALL_CONSUMER_OFFSET: the file's shape, {"offsetTable": {...}}."""
        return {"offsetTable": self._copy()}

    def _copy(self) -> dict[str, dict[int, int]]:
        return {key: dict(queues) for key, queues in self.table.items()}

    def persist(self) -> None:
        save_consumer_offsets(self.path, self._copy())
        self._dirty = False

    async def flush_periodically(self, interval_ms: int) -> None:
        """Write the table every interval when it changed; the fsync runs off the event loop."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            if not self._dirty:
                continue
            self._dirty = False
            table = self._copy()
            try:
                await asyncio.to_thread(save_consumer_offsets, self.path, table)
            except OSError:
                self._dirty = True
                log.exception("persisting consumer offsets failed; will retry")
