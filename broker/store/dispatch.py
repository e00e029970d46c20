"""Reput: the store's dispatch sink. Every record of the CommitLog reaches the ConsumeQueues, the
IndexFile and the arrival listeners (long polling) through it, once, in CommitLog order.

Built by MessageStore (broker.store.message_store) and given to the CommitLog at construction as its
`DispatchSink` (broker.store.dispatch_request): the CommitLog calls `appended` for each record it
writes and `written` after a slave's replicated bytes. One cursor, `reput_from_offset`, says how far
dispatch got; whatever is beyond it is dispatched by a pass that reads from the cursor:

- a record the put path handed over next in line, with only the ConsumeQueues to feed (the index is in
  its helper process, or off), is dispatched at once, inside `appended` (no request object, no pass);
- any other handed-over record is kept as a `DispatchRequest` (bounded) and dispatched by the pass,
  which runs once per loop iteration however many records came meanwhile;
- a record nobody handed over (recovery's re-dispatch from the confirmed offset, a slave's replicated
  bytes, a request dropped at the bound) is parsed from the mapped file by the same pass; with only the
  ConsumeQueues to feed, the pass reads just what a unit needs and writes a queue's units a run at a
  time (a slave's batches), leaving the uncommon records to the full parser.

The pass hands each request to the per-record dispatchers (the ConsumeQueueStore), then the pass's
requests to the batch dispatcher (the in-process IndexService), and tells the end listener (the index
helper process) the offset reached.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol.javahash import tags_code
from broker.protocol.message import NO_QUEUE_OFFSET, SysFlag
from broker.protocol.properties import Prop, find_property_bytes
from broker.protocol.record_layout import FIXED_SIZE_V4, MESSAGE_MAGIC_CODE, MIN_RECORD_SIZE
from broker.store.dispatch_request import (
    BLANK,
    CORRUPT,
    SCHEDULE_TOPIC,
    ArrivalListener,
    BatchDispatcher,
    Dispatcher,
    DispatchRequest,
    EndListener,
    incomplete_tail,
    parse_record,
)
from broker.store.results import StoreError

if TYPE_CHECKING:
    from broker.store.consume_queue import ConsumeQueue
    from broker.store.mapped_file_queue import MappedFileQueue

__all__ = ["MAX_PENDING", "ReputService", "UnitWriter"]

# What a ConsumeQueue unit needs of a record with IPv4 hosts, in one unpack: TOTALSIZE MAGICCODE, QUEUEID,
# QUEUEOFFSET PHYSICALOFFSET SYSFLAG, STORETIMESTAMP and BODYLEN, the fields between skipped
# (broker.protocol.record_layout gives the layout; tests/store/test_dispatch_runs.py holds the two equal).
_UNIT_FIELDS = struct.Struct(">ii4xi4xqqi8x8xq8x4x8xi")
assert _UNIT_FIELDS.size == FIXED_SIZE_V4
_U16 = struct.Struct(">H")
_NOT_IN_RUNS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | NO_QUEUE_OFFSET  # other layouts; no unit
_TAGS_PAIR = f"{Prop.TAGS}\x01".encode()
_SCHEDULE_TOPIC = SCHEDULE_TOPIC.encode()
_MAX_NAMES = 4096  # topic names remembered by their bytes

RETRY_S = 1.0  # a record that could not be dispatched (a full disk) is tried again this often
MAX_PENDING = 65_536  # handed-over requests kept for the pass: a few MB at most, even when dispatch lags

log = logging.getLogger(__name__)


class UnitWriter(Dispatcher, Protocol):
    """The ConsumeQueueStore: its queues by (topic, queue id), for the dispatch inside `appended`."""

    by_key: dict[tuple[str, int], ConsumeQueue]


class ReputService:
    """The CommitLog's dispatch sink, and the one reader of the CommitLog for dispatch.

    Its configuration (dispatchers, index, listeners) may change in any order, before or after
    `start()`: each change works out again whether `appended` may write ConsumeQueue units itself.
    """

    def __init__(
        self, files: MappedFileQueue, units: UnitWriter, *, delay_levels: dict[int, int] | None = None
    ) -> None:
        self.files = files  # the CommitLog's mapped files
        self.delay_levels = delay_levels
        self.units = units
        self._unit_queues = units.by_key  # the same dict, never replaced
        self._dispatchers: list[Dispatcher] = [units]
        self._batch: BatchDispatcher | None = None
        self._end_listener: EndListener | None = None
        self._listeners: list[ArrivalListener] = []
        # requests handed over by `appended` and not dispatched yet, in CommitLog order
        self._pending: collections.deque[DispatchRequest] = collections.deque()
        self.reput_from_offset = 0
        self.last_dispatch_timestamp = 0
        self._told = -1  # the offset the end listener was last told
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False  # a pass is queued on the loop
        self._closing = False
        self._direct = False  # `appended` may write units itself (see _refresh_direct)
        self._runs = False  # the pass may write a queue's units a run at a time (see _refresh_direct)
        self._topic_names: dict[bytes, str] = {}
        self._failed_at = -1

    # -- configuration (any order) ----------------------------------------------------------------------

    def start(self) -> None:
        """Dispatch from now on in passes on the running loop (until then, only `dispatch_from` does)."""
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self._refresh_direct()
        self._schedule()  # anything written before the start

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        """Another per-record dispatcher: from now on it sees every record (so `appended` no longer
        writes units itself: every record goes through the pass, as a request)."""
        self._dispatchers.append(dispatcher)
        self._refresh_direct()

    def set_index(self, batch: BatchDispatcher | None = None, end_listener: EndListener | None = None) -> None:
        """The index: in process (`batch` gets each pass's requests) or in the helper process (told the
        offset each pass reached: it reads the records itself), or none."""
        self._batch = batch
        self._end_listener = end_listener
        self._told = -1
        self._refresh_direct()

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._listeners.append(listener)

    def _refresh_direct(self) -> None:
        self._runs = len(self._dispatchers) == 1 and self._batch is None
        self._direct = self._runs and self._loop is not None and not self._closing

    # -- the sink -------------------------------------------------------------------------------------

    def appended(
        self,
        key: tuple[str, int],
        phy: int,
        size: int,
        tags_code: int,
        store_ts: int,
        cq_offset: int,
        sys_flag: int,
        found: tuple[object, str | None, str | None],
        prepared_offset: int,
    ) -> None:
        """A record the put path just wrote (DispatchSink). Dispatched now when it is next in line and
        its unit is `ConsumeQueue.put_next`'s common case; otherwise kept for the pass, which creates
        queues and files, fills gaps, retries a failed write and reports it."""
        if (
            self._direct
            and phy == self.reput_from_offset
            and (
                sys_flag & NO_QUEUE_OFFSET
                or ((cq := self._unit_queues.get(key)) is not None and cq.put_next(phy, size, tags_code, cq_offset))
            )
        ):
            self.reput_from_offset = phy + size
            self.last_dispatch_timestamp = store_ts
            if self._listeners:
                for listener in self._listeners:
                    try:
                        listener(key[0], key[1], cq_offset + 1, tags_code, None)
                    except Exception:  # a listener bug must not stop dispatch
                        log.exception("arrival listener failed")
            if not self._scheduled:
                self._schedule()  # the end listener hears of it after the pass
            return
        pending = self._pending
        if len(pending) < MAX_PENDING:  # beyond: the pass parses the record from the file
            pending.append(DispatchRequest(
                key[0], key[1], phy, size, tags_code, store_ts, cq_offset, found[1], found[2], sys_flag, prepared_offset
            ))  # fmt: skip
        if not self._scheduled:
            self._schedule()

    def appended_run(
        self,
        key: tuple[str, int],
        offsets: list[int],
        sizes: list[int],
        tags_codes: list[int],
        store_ts: int,
        cq_offset: int,
        sys_flag: int,
        founds: list[tuple[object, str | None, str | None]],
    ) -> None:
        """A batch's records (DispatchSink): when the first is next in line, their units are written with
        one `ConsumeQueue.put_run` and each listener hears once per distinct tags code, of the offset after
        the last (no held pull waits inside a batch appended in one step); otherwise each goes through
        `appended`."""
        if (
            self._direct
            and offsets[0] == self.reput_from_offset
            and not sys_flag & NO_QUEUE_OFFSET
            and (cq := self._unit_queues.get(key)) is not None
            and cq.put_run(offsets, sizes, tags_codes, cq_offset)
        ):
            self.reput_from_offset = offsets[-1] + sizes[-1]
            self.last_dispatch_timestamp = store_ts
            if self._listeners:
                _tell_run(self._listeners, *key, cq_offset + len(sizes), tags_codes)
            if not self._scheduled:
                self._schedule()
            return
        appended = self.appended
        for i, phy in enumerate(offsets):
            appended(key, phy, sizes[i], tags_codes[i], store_ts, cq_offset + i, sys_flag, founds[i], 0)

    def written(self, end: int) -> None:
        """Bytes up to `end` were appended without their records (DispatchSink): the pass reads them."""
        if not self._scheduled:
            self._schedule()

    # -- passes ---------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        if self._loop is not None and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run_once)

    def _run_once(self) -> None:
        self._scheduled = False
        if self._closing:
            return
        try:
            self.dispatch_available()
        except Exception as exc:  # the record is retried: on the next put, or by the timer below
            self._failed(exc)

    def catch_up(self) -> None:
        """Run the pass now instead of at the next loop turn: a query by key must see every record put
        before it, and the index helper hears of records dispatched inside `appended` only from a pass."""
        if self._closing:
            return
        try:
            self.dispatch_available()
        except Exception as exc:  # retried as after a failed pass
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        offset = self.reput_from_offset
        if offset != self._failed_at:  # once per stuck record, not once per retry
            self._failed_at = offset
            log.error(
                "reput stopped at CommitLog offset %d, retrying every %.0f s: %s",
                offset,
                RETRY_S,
                exc,
                exc_info=not isinstance(exc, StoreError),
            )
        if self._loop is not None and not self._closing:
            self._loop.call_later(RETRY_S, self._schedule)

    async def close(self) -> None:
        """Dispatch what is left, then stop (what cannot be dispatched now is redone after a restart)."""
        self._closing = True
        self._loop = None
        self._refresh_direct()
        try:
            self.dispatch_available()
        except Exception as exc:
            self._failed(exc)

    @property
    def dispatches_appended(self) -> bool:
        """`appended` writes the ConsumeQueue units itself (started; the ConsumeQueues are the only
        per-record dispatcher and the index, if any, is in its helper process)."""
        return self._direct

    @property
    def pending(self) -> int:
        """Handed-over records waiting for the pass."""
        return len(self._pending)

    @property
    def behind(self) -> int:
        return self.files.max_offset - self.reput_from_offset

    def dispatch_from(self, offset: int) -> int:
        """Recovery: dispatch everything from CommitLog `offset` (the confirmed end the ConsumeQueues and
        the index cover) to the recovered end, now, without the arrival listeners; returns how many.
        Dispatch is idempotent, so records the queues hold already are skipped."""
        self._pending.clear()
        self.reput_from_offset = offset
        return self.dispatch_available(notify_listeners=False)

    def dispatch_available(self, *, notify_listeners: bool = True, limit: int | None = None) -> int:
        """Dispatch every whole record up to the CommitLog's written end (or `limit`); returns how many.

        The per-record dispatchers and the listeners see each record as it is read; the batch
        dispatcher gets the pass's records at the end, and the end listener the offset it reached, also
        when a record failed (those before it are in the ConsumeQueue already, so they must be indexed
        too).
        """
        end = self.files.max_offset if limit is None else limit
        batch: list[DispatchRequest] = []
        try:
            return self._dispatch_until(end, batch if self._batch is not None else None, notify_listeners)
        finally:
            if batch and self._batch is not None:
                self._batch.dispatch_batch(batch)
            if self.reput_from_offset != self._told:  # moved by this pass, or inside `appended`
                self._told = self.reput_from_offset
                if self._end_listener is not None:
                    self._end_listener(self._told)

    def _dispatch_until(self, end: int, batch: list[DispatchRequest] | None, notify_listeners: bool) -> int:
        count = 0
        queue = self.files
        listeners = self._listeners if notify_listeners else []
        dispatchers = self._dispatchers
        delay_levels = self.delay_levels
        pending = self._pending
        last_ts = 0
        while self.reput_from_offset < end:
            offset = self.reput_from_offset
            mf = queue.find_mapped_file_by_offset(offset)
            if mf is None:
                # before the first file (retention moved it): jump forward
                first = queue.get_first_mapped_file()
                if first is None or first.file_from_offset <= offset:
                    break
                self.reput_from_offset = first.file_from_offset
                continue
            base = mf.file_from_offset
            pos = offset - base
            file_end = min(mf.wrote_position, end - base)
            buf = mf.mm
            try:
                while pos < file_end:
                    if self._runs and not pending:
                        pos, done, ts = self._dispatch_runs(buf, base, pos, file_end, listeners)
                        if done:
                            count += done
                            last_ts = ts
                        if pos >= file_end:
                            break
                    # the put path's request for this very record, when it left one: no re-parse
                    while pending and pending[0].commit_log_offset < base + pos:
                        pending.popleft()  # behind us (a request from before a recovery's restart point)
                    req: DispatchRequest | None
                    if pending and pending[0].commit_log_offset == base + pos:
                        req = pending.popleft()
                        size = req.msg_size
                    else:
                        size, req = parse_record(buf, pos, file_end, check_crc=False, delay_levels=delay_levels)
                    if req is None:
                        if size == BLANK:
                            pos = mf.file_size
                        elif size == CORRUPT and not incomplete_tail(buf, pos, file_end):
                            log.error("reput: unreadable record at CommitLog offset %d", base + pos)
                        break
                    for d in dispatchers:
                        d.dispatch(req)  # on an error the retry parses the record again
                    if batch is not None:
                        batch.append(req)
                    last_ts = req.store_timestamp
                    for listener in listeners:
                        try:
                            # properties are not parsed here: a listener that needs them reads the record
                            listener(req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code, None)
                        except Exception:  # a listener bug must not stop dispatch
                            log.exception("arrival listener failed")
                    pos += size
                    count += 1
            finally:
                # kept current per file (and on an error), so a failed record is where the next pass starts
                if last_ts:
                    self.last_dispatch_timestamp = last_ts
                new_offset = base + pos
                moved = new_offset != self.reput_from_offset
                self.reput_from_offset = new_offset
            if not moved:
                break
        return count

    def _dispatch_runs(
        self, buf: Any, base: int, pos: int, file_end: int, listeners: list[ArrivalListener]
    ) -> tuple[int, int, int]:
        """Dispatch the common records from `pos` on, a queue's run at a time: each run of records of one
        queue with consecutive queue offsets (a batch, as the master wrote it) takes one
        `ConsumeQueue.put_run`, and each listener hears once per distinct tags code of the run, as with
        `appended_run`. Only what a unit needs is read of a record; its TAGS only when it has one.

        Returns (where it stopped, records dispatched, the last one's store time). It stops before a record
        it leaves to the per-record path: another layout, a transaction half, a scheduled message, a queue
        not created yet, a unit `put_run` cannot take, anything unreadable, and the end of the data.
        """
        head, u16 = _UNIT_FIELDS.unpack_from, _U16.unpack_from
        run_topic, run_queue, run_first, run_ts = b"", -1, 0, 0
        offsets: list[int] = []
        sizes: list[int] = []
        codes: list[int] = []
        done = last_ts = 0
        while True:
            topic = None
            if pos + FIXED_SIZE_V4 <= file_end:
                total, magic, queue_id, cq_offset, phy, sys_flag, store_ts, body_len = head(buf, pos)
                end = pos + total
                if (
                    magic == MESSAGE_MAGIC_CODE
                    and not sys_flag & _NOT_IN_RUNS
                    and total >= MIN_RECORD_SIZE
                    and end <= file_end
                    and 0 <= body_len <= total - MIN_RECORD_SIZE
                    and phy == base + pos
                ):
                    p = pos + FIXED_SIZE_V4 + body_len
                    props_at = p + 3 + buf[p]
                    if props_at <= end and props_at + u16(buf, props_at - 2)[0] == end:
                        topic = buf[p + 1 : props_at - 2]
                        code = 0
                        if props_at < end and _TAGS_PAIR in (props := buf[props_at:end]):
                            tags = find_property_bytes(props, Prop.TAGS)
                            try:
                                code = tags_code(tags.decode()) if tags else 0
                            except UnicodeDecodeError:  # the per-record parser says what it is
                                topic = None
            if topic != run_topic or queue_id != run_queue or cq_offset != run_first + len(offsets):
                # the run ends here: write it, then start the next one with this record
                if offsets:
                    if not self._put_run(run_topic, run_queue, run_first, offsets, sizes, codes, listeners):
                        return pos - sum(sizes), done, last_ts
                    done += len(offsets)
                    last_ts = run_ts
                    offsets, sizes, codes = [], [], []
                if topic is None or topic == _SCHEDULE_TOPIC:
                    return pos, done, last_ts
                run_topic, run_queue, run_first = topic, queue_id, cq_offset
            offsets.append(phy)
            sizes.append(total)
            codes.append(code)
            run_ts = store_ts
            pos = end

    def _put_run(
        self,
        topic_bytes: bytes,
        queue_id: int,
        cq_offset: int,
        offsets: list[int],
        sizes: list[int],
        codes: list[int],
        listeners: list[ArrivalListener],
    ) -> bool:
        """One run's units in one `ConsumeQueue.put_run`, then its arrivals; False (nothing written) when
        the queue does not exist yet or cannot take them so."""
        names = self._topic_names
        topic = names.get(topic_bytes)
        if topic is None:
            try:
                topic = topic_bytes.decode()
            except UnicodeDecodeError:  # the per-record parser says what it is
                return False
            if len(names) >= _MAX_NAMES:
                names.clear()
            names[topic_bytes] = topic
        cq = self._unit_queues.get((topic, queue_id))
        if (
            cq is None
            or offsets[0] + sizes[0] <= cq.max_physic_offset  # dispatched before a restart: `put` skips it
            or not cq.put_run(offsets, sizes, codes, cq_offset)
        ):
            return False
        if listeners:
            _tell_run(listeners, topic, queue_id, cq_offset + len(offsets), codes)
        return True


def _tell_run(listeners: list[ArrivalListener], topic: str, queue_id: int, after: int, codes: list[int]) -> None:
    """A run of units was written up to queue offset `after`: each listener hears once per distinct tags
    code (no held pull waits inside a run written in one step)."""
    for code in dict.fromkeys(codes):
        for listener in listeners:
            try:
                listener(topic, queue_id, after, code, None)
            except Exception:  # a listener bug must not stop dispatch
                log.exception("arrival listener failed")
