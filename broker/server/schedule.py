"""The schedule (delay) service: delivers messages parked in SCHEDULE_TOPIC_XXXX when they are due.

`BrokerController` starts it on a master. Delayed sends and retries (CONSUMER_SEND_MSG_BACK) are
stored in SCHEDULE_TOPIC_XXXX queue `level - 1` with REAL_TOPIC/REAL_QID; within one level messages
are due in store order, so each level is a cursor: read from its offset, re-put every due message to
its real topic and queue (DELAY/REAL_* removed), advance, stop at the first message not yet due.
Progress per level is kept in delayOffset.json (`{level: offset}`), saved periodically and at close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.protocol.message import MessageExt, decode_record
from broker.protocol.properties import Prop
from broker.server.persist import JsonFile
from broker.server.topics import SCHEDULE_TOPIC
from broker.store.results import GetStatus, MessageToStore
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["ScheduleService", "due_time", "restore_real_target"]

log = logging.getLogger(__name__)

SCHEDULE_GROUP = "SCHEDULE_CONSUMER"
POLL_INTERVAL = 0.1
BATCH = 32


def due_time(msg: MessageExt, delay_ms: int) -> int:
    return msg.store_timestamp + delay_ms


def restore_real_target(msg: MessageExt) -> MessageToStore:
    """The message to re-put when due: real topic and queue, delay properties removed."""
    props = dict(msg.properties)
    topic = props.pop(Prop.REAL_TOPIC)
    queue_id = int(props.pop(Prop.REAL_QID, "0"))
    props.pop(Prop.DELAY, None)
    props[Prop.WAIT] = "false"
    return MessageToStore.from_stored(msg, topic=topic, queue_id=queue_id, properties=props)


class ScheduleService:
    def __init__(self, store: MessageStore, delay_levels_ms: list[int], config_dir: Path) -> None:
        self.store = store
        self.delays = {level: ms for level, ms in enumerate(delay_levels_ms, start=1)}
        self.offsets: dict[int, int] = {}
        self._file = JsonFile(config_dir / "delayOffset.json")
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self.wakeup = asyncio.Event()

    def load(self) -> None:
        data = self._file.load() or {}
        for level, offset in (data.get("offsetTable") or {}).items():
            self.offsets[int(level)] = int(offset)

    def snapshot(self) -> dict[str, Any]:
        return {"offsetTable": dict(self.offsets)}

    def persist(self) -> None:
        self._file.save(self.snapshot())
        self._dirty = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self.persist()

    async def _run(self) -> None:
        last_persist = time.monotonic()
        while True:
            try:
                await self.deliver_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("schedule service round failed; retrying")
            if self._dirty and time.monotonic() - last_persist > 10:
                await asyncio.to_thread(self._file.save, self.snapshot())
                self._dirty = False
                last_persist = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), POLL_INTERVAL)
            self.wakeup.clear()

    async def deliver_due(self, now_ms: int | None = None) -> int:
        """One pass over every level; returns how many messages were delivered."""
        delivered = 0
        for level, delay in self.delays.items():
            delivered += await self._deliver_level(level, delay, now_ms)
        return delivered

    async def _deliver_level(self, level: int, delay: int, now_ms: int | None) -> int:
        queue_id = level - 1
        delivered = 0
        while True:
            offset = self.offsets.get(level, 0)
            got = self.store.get_message(SCHEDULE_GROUP, SCHEDULE_TOPIC, queue_id, offset, BATCH)
            if got.status is not GetStatus.FOUND:
                if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
                    self.offsets[level] = got.next_begin_offset
                    self._dirty = True
                got.release()
                return delivered
            records = [decode_record(buf) for buf in got.buffers]
            offsets = list(got.queue_offsets) or list(range(offset, offset + len(records)))
            got.release()
            now = int(time.time() * 1000) if now_ms is None else now_ms
            for msg, queue_offset in zip(records, offsets, strict=False):
                if due_time(msg, delay) > now:
                    return delivered
                if Prop.REAL_TOPIC in msg.properties:
                    result = await self.store.put(restore_real_target(msg), report=True)  # not a send (metrics)
                    if not result.ok:
                        log.warning(
                            "re-putting delayed message to %s failed: %s; will retry",
                            msg.properties.get(Prop.REAL_TOPIC),
                            result.status.name,
                        )
                        return delivered
                    delivered += 1
                else:
                    log.warning(
                        "message at offset %d of delay level %d has no REAL_TOPIC; skipped", queue_offset, level
                    )
                self.offsets[level] = queue_offset + 1
                self._dirty = True
