"""The timer service: puts timed messages parked in `rmq_sys_wheel_timer` back to their topics at their
delivery millisecond (timer_message.py says how they are parked).

`BrokerController` loads it and starts it on a master. Parked messages are not due in store order, so
unlike the delay levels (one cursor per level) the service reads the timer queue as it grows and keeps
every pending message in a heap keyed by delivery time: (deliver ms, queue offset, CommitLog offset),
about 100 bytes each. It sleeps until the earliest is due (or until the store reports a new parked
message), then re-puts every due message through the ordinary put and records it as delivered.

What is delivered is kept in config/timerCheckpoint.json: the lowest queue offset not yet delivered,
and the delivered ranges above it. At start the heap is rebuilt from the store: every parked message
from that offset on that the checkpoint does not list. The checkpoint is written at most once a second
and at close, after the puts it records completed (with SYNC_FLUSH: were flushed), so a kill -9
loses no timed message; one delivered in the last second before it may be delivered again
(at-least-once, as RocketMQ's timer store).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.protocol.message import MessageExt, decode_record
from broker.server.persist import JsonFile
from broker.server.timer_message import TIMER_OUT_MS, TIMER_TOPIC, release_from_timer
from broker.store.results import GetStatus, PutResult
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["DeliveredRanges", "TimerService"]

log = logging.getLogger(__name__)

TIMER_GROUP = "TIMER_CONSUMER"
READ_BATCH = 256
#: Most messages put back in one go (their puts are awaited together: one group commit).
DELIVER_BATCH = 512
PERSIST_INTERVAL = 1.0
#: Longest sleep with nothing due: a safety net for a missed wake-up.
IDLE_WAIT = 1.0
#: A put the store refused (disk full, shutting down) is tried again this much later.
RETRY_DELAY_MS = 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class DeliveredRanges:
    """Delivered queue offsets above the low watermark, as sorted [start, end) ranges.

    Deliveries run mostly in offset order (timers of similar length), so a few ranges cover thousands
    of offsets; `advance` forgets everything below the watermark."""

    def __init__(self, ranges: list[tuple[int, int]] | None = None) -> None:
        self.ranges: list[tuple[int, int]] = sorted(ranges or [])

    def __contains__(self, offset: int) -> bool:
        for start, end in self.ranges:
            if start <= offset < end:
                return True
            if start > offset:
                return False
        return False

    def add(self, offset: int) -> None:
        ranges = self.ranges
        # a bisect on starts: where the new offset goes, then merge with its neighbours
        lo, hi = 0, len(ranges)
        while lo < hi:
            mid = (lo + hi) // 2
            if ranges[mid][0] <= offset:
                lo = mid + 1
            else:
                hi = mid
        i = lo  # ranges[:i] start at or before offset
        if i and ranges[i - 1][0] <= offset < ranges[i - 1][1]:
            return
        start, end = offset, offset + 1
        if i and ranges[i - 1][1] == offset:
            i -= 1
            start = ranges[i][0]
            del ranges[i]
        if i < len(ranges) and ranges[i][0] == end:
            end = ranges[i][1]
            del ranges[i]
        ranges.insert(i, (start, end))

    def advance(self, watermark: int) -> None:
        kept = []
        for start, end in self.ranges:
            if end <= watermark:
                continue
            kept.append((max(start, watermark), end))
        self.ranges = kept

    def count(self) -> int:
        return sum(end - start for start, end in self.ranges)


class TimerService:
    def __init__(self, store: MessageStore, config_dir: Path) -> None:
        self.store = store
        self._file = JsonFile(config_dir / "timerCheckpoint.json")
        #: (deliver ms, queue offset, CommitLog offset) of every parked message read and not delivered
        self.pending: list[tuple[int, int, int]] = []
        self.delivered = DeliveredRanges()
        self.read_offset = 0  # next queue offset of the timer topic to read
        self.watermark = 0  # every offset below it is delivered
        self.delivered_total = 0
        # Offsets read and not yet delivered (pending or being put back), and a heap of them with stale
        # entries popped lazily: the watermark is its smallest live one.
        self._undelivered: set[int] = set()
        self._offsets: list[int] = []
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self.wakeup = asyncio.Event()

    # ------------------------------------------------------------------ state on disk

    def load(self) -> None:
        data = self._file.load() or {}
        self.watermark = self.read_offset = int(data.get("offset", 0))
        self.delivered = DeliveredRanges([(int(s), int(e)) for s, e in data.get("delivered") or []])

    def snapshot(self) -> dict[str, Any]:
        return {"offset": self.watermark, "delivered": [list(r) for r in self.delivered.ranges]}

    def persist(self) -> None:
        self._file.save(self.snapshot())
        self._dirty = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.store.add_arrival_listener(self._arrived)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self.persist()

    def _arrived(self, topic: str, *_: object) -> None:
        if topic == TIMER_TOPIC:
            self.wakeup.set()

    async def _run(self) -> None:
        last_persist = time.monotonic()
        while True:
            try:
                self.read_new()
                await self.deliver_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer service round failed; retrying")
            if self._dirty and time.monotonic() - last_persist >= PERSIST_INTERVAL:
                await asyncio.to_thread(self._file.save, self.snapshot())
                self._dirty = False
                last_persist = time.monotonic()
            wait = IDLE_WAIT
            if self.pending:
                wait = min(wait, max(self.pending[0][0] - _now_ms(), 0) / 1000)
            if self._dirty:
                wait = min(wait, PERSIST_INTERVAL)
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), wait)
            self.wakeup.clear()

    # ------------------------------------------------------------------ reading the timer queue

    def read_new(self) -> int:
        """Read parked messages from `read_offset` on into the heap; returns how many were added."""
        added = 0
        while True:
            got = self.store.get_message(TIMER_GROUP, TIMER_TOPIC, 0, self.read_offset, READ_BATCH)
            if got.status is not GetStatus.FOUND:
                if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
                    # expired files (too small), or a checkpoint ahead of a store that lost its tail
                    log.warning(
                        "timer queue offset %d is gone; reading on from %d", self.read_offset, got.next_begin_offset
                    )
                    if got.next_begin_offset < self.read_offset:
                        self.delivered = DeliveredRanges()  # those offsets will be new messages
                    self.read_offset = got.next_begin_offset
                    self._advance_watermark()
                got.release()
                return added
            try:
                records = [decode_record(buf) for buf in got.buffers]
                offsets = list(got.queue_offsets) or list(range(self.read_offset, self.read_offset + len(records)))
            finally:
                got.release()
            for msg, offset in zip(records, offsets, strict=False):
                self.read_offset = offset + 1
                if offset < self.watermark or offset in self.delivered:
                    continue
                heapq.heappush(self.pending, (_due_of(msg), offset, msg.commit_log_offset))
                self._undelivered.add(offset)
                heapq.heappush(self._offsets, offset)
                added += 1
            self._advance_watermark()

    # ------------------------------------------------------------------ delivering

    async def deliver_due(self, now_ms: int | None = None) -> int:
        """Put back every parked message due by `now_ms`; returns how many were delivered."""
        delivered = 0
        while self.pending and self.pending[0][0] <= (now := _now_ms() if now_ms is None else now_ms):
            batch: list[tuple[int, int, int]] = []
            while self.pending and self.pending[0][0] <= now and len(batch) < DELIVER_BATCH:
                batch.append(heapq.heappop(self.pending))
            delivered += await self._put_back(batch, now)
        return delivered

    async def _put_back(self, batch: list[tuple[int, int, int]], now_ms: int) -> int:
        puts: list[tuple[tuple[int, int, int], PutResult | asyncio.Future[PutResult]]] = []
        for entry in batch:
            parked = self.store.look_message_by_offset(entry[2])
            if parked is None:
                log.warning("timed message at timer offset %d is no longer in the CommitLog; skipped", entry[1])
                self._mark_delivered(entry[1])
                continue
            try:
                msg = release_from_timer(parked, now_ms)
            except (KeyError, ValueError) as exc:
                log.warning("timed message at timer offset %d has no target (%s); skipped", entry[1], exc)
                self._mark_delivered(entry[1])
                continue
            puts.append((entry, self.store.append(msg, report=True)))  # a delivery, not a send (metrics)
        delivered = 0
        for entry, put in puts:
            result = put if isinstance(put, PutResult) else await put
            if result.ok:
                self._mark_delivered(entry[1])
                delivered += 1
            else:
                log.warning("putting back a timed message failed (%s); retrying in 1 s", result.status.name)
                heapq.heappush(self.pending, (now_ms + RETRY_DELAY_MS, entry[1], entry[2]))
        self.delivered_total += delivered
        self._advance_watermark()
        return delivered

    def _mark_delivered(self, offset: int) -> None:
        self.delivered.add(offset)
        self._undelivered.discard(offset)
        self._dirty = True

    def _advance_watermark(self) -> None:
        """The lowest offset not yet delivered (pending or being put back), else the read end."""
        offsets = self._offsets
        while offsets and offsets[0] not in self._undelivered:
            heapq.heappop(offsets)
        low = offsets[0] if offsets else self.read_offset
        if low != self.watermark:
            self.watermark = low
            self.delivered.advance(low)
            self._dirty = True

    # ------------------------------------------------------------------ runtime info

    def stats(self) -> dict[str, int]:
        return {
            "pending": len(self.pending),
            "delivered": self.delivered_total,
            "readOffset": self.read_offset,
            "watermark": self.watermark,
        }


def _due_of(msg: MessageExt) -> int:
    raw = msg.properties.get(TIMER_OUT_MS, "")
    try:
        return int(raw)
    except ValueError:
        return 0  # unreadable: due at once, and put back where it was headed
