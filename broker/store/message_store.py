"""MessageStore: the store's façade (RocketMQ's DefaultMessageStore), the only object callers hold.

Created by the broker (broker.server) and the HA service (broker.ha); the contract is
docs/design/store-api.md. It owns the CommitLog, the ConsumeQueueStore, the IndexService, the checkpoint
and the background services (flush, logics flush, reput, clean), runs recovery at `start()`, and turns
every expected outcome into a status. Blocking work (recovery, fdatasync, file creation, unlink) runs in
worker threads; put and get run on the event loop.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from broker.protocol.message import MessageExt, decode_record
from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog, commit_log_files
from broker.store.config import StoreConfig
from broker.store.consume_queue import BLANK_UNIT_SIZE, UNIT, ConsumeQueueStore
from broker.store.dispatch import ReputService
from broker.store.dispatch_request import ArrivalListener
from broker.store.flush import CommitLogFlushService, LogicsFlushService
from broker.store.index_process import IndexProcess
from broker.store.index_service import IndexService
from broker.store.populate import MIN_FILE_SIZE, PagePopulator
from broker.store.recovery import RecoveryReport, recover_commit_log
from broker.store.results import (
    PUT_OK,
    BatchToStore,
    GetResult,
    GetStatus,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    StoreError,
)
from broker.store.retention import CleanService

__all__ = ["MessageStore", "PutReporter", "TagsFilter", "record_sizes"]

log = logging.getLogger(__name__)

LOCK_WAIT_S = 10.0  # see start()

TagsFilter = set[int] | frozenset[int] | Callable[[int, "dict[str, str] | None"], bool] | None


# Told of a reported put (`MessageStore.append(..., report=True)`) in the step that appends it: its topic and the
# size of each record it stored
PutReporter = Callable[[str, Sequence[int]], None]


def record_sizes(result: PutResult) -> Sequence[int]:
    """The size of each record a successful put stored: one, or a batch's from its records' offsets."""
    offsets = result.offsets
    if not offsets:
        return (result.wrote_bytes,)
    ends = [*offsets[1:], result.commit_log_offset + result.wrote_bytes]
    return [end - start for start, end in zip(offsets, ends, strict=True)]


class Replica(Protocol):
    """What the store needs of replication (implemented by broker.ha.master.HAMaster)."""

    def data_appended(self, end_offset: int) -> None:
        """New bytes end at `end_offset` (cheap: called once per put)."""

    def wait_acked(self, end_offset: int, result: PutResult) -> PutResult | asyncio.Future[PutResult]:
        """`result` once a slave acknowledged `end_offset` (its status tells a timeout or no slave)."""


class MessageStore:
    def __init__(self, config: StoreConfig, store_host: tuple[str, int] = ("127.0.0.1", 10911)) -> None:
        self.config = config
        self.store_host = store_host
        self.consume_queue_store = ConsumeQueueStore(config.consume_queue_dir, config.mapped_file_size_consume_queue)
        # put -> dispatch: the CommitLog hands every record it writes to the reput service, its sink,
        # which reads the same files for the records nobody handed over (recovery, HA)
        files = commit_log_files(config)
        self.reput = ReputService(files, self.consume_queue_store, delay_levels=config.delay_levels())
        self.commit_log = CommitLog(config, store_host, self.reput, files)
        self.consume_queue_store.on_write_failure = self.commit_log.allocator.release_spare
        # the in-process index (recovery always uses it) and the one in use once started: the same, or
        # the helper process's (StoreConfig.index_helper)
        self.index_service: IndexService | None = None
        self.index: IndexService | IndexProcess | None = None
        if config.message_index_enable:
            self.index_service = IndexService(
                config.index_dir, hash_slot_num=config.max_hash_slot_num, index_num=config.max_index_num
            )
            self.reput.set_index(batch=self.index_service)
            self.index = self.index_service
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: CommitLogFlushService | None = None
        self.logics_flush: LogicsFlushService | None = None
        self.clean_service: CleanService | None = None
        self.recovery_report: RecoveryReport | None = None
        self._replica: Replica | None = None
        # Told of each put made with `report=True` (the broker's metrics: broker/metrics/broker_meters.py)
        self.put_reporter: PutReporter | None = None
        self._running = False
        self._lock_fd = -1
        self._sync = config.sync_flush
        # What a put depends on, worked out again when it changes (_update_put_path), not on every put
        self._refusal: PutStatus | None = PutStatus.SERVICE_NOT_AVAILABLE
        self._answer_at_once = False  # taking puts, ASYNC_FLUSH, no slave to wait for
        # fallocated CommitLog files get their pages faulted in ahead of the writer (zero-filled ones
        # are in the page cache already)
        self.populator: PagePopulator | None = None
        if not config.zero_fill() and config.mapped_file_size_commit_log >= MIN_FILE_SIZE:
            self.populator = PagePopulator(self.commit_log.queue)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load files, recover (crash-aware), then start the services and mark the run with `abort`."""
        root = self.config.store_path_root_dir
        root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.config.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        # The index helper of a store that was just killed holds the lock until it has finished: wait
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self._lock_fd)
                    self._lock_fd = -1
                    raise StoreError(f"{root} is locked by another running store") from None
                await asyncio.sleep(0.1)
        abnormal = self.config.abort_path.exists()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._load_and_recover, abnormal)
        checkpoint = self.checkpoint
        assert checkpoint is not None
        # from here on a kill leaves `abort` behind, and the checkpoint no longer vouches for the end
        checkpoint.clean_shutdown_offset = -1
        await loop.run_in_executor(None, self._mark_running, checkpoint)
        config = self.config
        self.flush_service = CommitLogFlushService(
            self.commit_log,
            checkpoint,
            sync=config.sync_flush,
            sync_flush_timeout_ms=config.sync_flush_timeout,
            interval_ms=config.flush_interval_commit_log,
            least_pages=config.flush_commit_log_least_pages,
            thorough_interval_ms=config.flush_commit_log_thorough_interval,
        )
        self.logics_flush = LogicsFlushService(
            self._flush_logics,
            self._dispatched_timestamp,
            checkpoint,
            self.flush_service.executor,
            interval_ms=config.flush_interval_consume_queue,
            index_enabled=self.index_service is not None,
        )
        self.clean_service = CleanService(
            config, self.commit_log.queue, self._after_commit_log_delete, on_disk_full_change=self._update_put_path
        )
        if config.index_helper() and self.index_service is not None:
            self._start_index_helper(self.index_service)
        self.flush_service.start()
        self.logics_flush.start()
        self.reput.start()
        self.clean_service.start()
        if not self.commit_log.queue.files and config.broker_role != "SLAVE":
            # A fresh store: create the first CommitLog file now (sparse: instant; its space is reserved
            # ahead of the writer from here on), before the broker says "boot success". A slave's first
            # file is placed by the master's offset (append_to_commit_log), so it waits for that.
            try:
                await self.commit_log.allocator.take()
            except OSError as exc:
                log.error("cannot create the first CommitLog file: %s (puts will retry)", exc)
        if self.commit_log.queue.files:
            self.commit_log.allocator.request_next()  # the next file, ahead of need, in its own thread
        if self.populator is not None:
            self.populator.start()
        self._running = True
        self._update_put_path()

    def _start_index_helper(self, in_process: IndexService) -> None:
        """Hand the index over to a helper process, from where recovery left it (in process)."""
        helper = IndexProcess(self.config, lock_fd=self._lock_fd)
        in_process.write_pending()
        if not helper.start(self.reput.reput_from_offset):
            return  # indexed in process, as before
        in_process.close()
        self.index = helper
        self.reput.set_index(end_listener=helper.dispatched_to)

    def _dispatched_timestamp(self) -> int:
        """The store time the checkpoint may vouch for: records up to it are in the ConsumeQueues and, once
        the index's gathered records are written here (or announced to the helper), in the index too."""
        if self.index is not None:
            self.index.write_pending()
        return self.reput.last_dispatch_timestamp

    def _mark_running(self, checkpoint: StoreCheckpoint) -> None:
        checkpoint.flush()
        fd = os.open(self.config.abort_path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)

    def _load_and_recover(self, abnormal: bool) -> None:
        """Blocking (worker thread, nothing else runs yet)."""
        config = self.config
        t0 = time.monotonic()
        self.checkpoint = StoreCheckpoint(config.checkpoint_path)
        if not self.commit_log.queue.load():
            raise StoreError(f"cannot load the CommitLog in {config.commit_log_dir} (see the log)")
        self.consume_queue_store.load()
        if self.index_service is not None:
            self.index_service.load(not abnormal)
        report = recover_commit_log(
            self.commit_log.queue,
            self.checkpoint,
            abnormal=abnormal,
            check_crc=config.check_crc_on_recover,
            with_index=self.index_service is not None and config.message_index_safe,
        )
        self.recovery_report = report
        end = report.end_offset
        self.consume_queue_store.recover()
        self.consume_queue_store.truncate_dirty(end)
        if self.index_service is not None:
            self.index_service.truncate_dirty(end, self.commit_log.store_timestamp_at)
        # re-dispatch what the queues (and, after a crash, the index) may not have yet: from the end they
        # cover, never past the recovered end; dispatch skips anything already there
        queue_end = self.consume_queue_store.max_physic_offset()
        start = min(end, queue_end) if queue_end >= 0 else 0
        if abnormal and self.index_service is not None:
            # no index file at all (killed before the first gathered write): the index covers nothing yet
            start = min(start, self.index_service.end_phy_offset)
        start = max(start, self.commit_log.min_offset)
        n = self.reput.dispatch_from(start)
        min_phy = self.commit_log.min_offset
        if min_phy >= 0:
            self.consume_queue_store.clean_expired(min_phy)
        self.commit_log.topic_queue_table.clear()
        self._continue_queues()
        log.info(
            "store loaded in %.2f s (%s): CommitLog [%d, %d), %d records re-dispatched from %d",
            time.monotonic() - t0,
            "after a crash" if abnormal else "clean",
            max(min_phy, 0),
            end,
            n,
            start,
        )

    def _continue_queues(self) -> None:
        """Each queue's next offset from its ConsumeQueue: new puts continue after what the queues hold."""
        table = self.commit_log.topic_queue_table
        queues = self.consume_queue_store
        for topic, queue_ids in queues.topics_and_queues().items():
            for qid in queue_ids:
                table[(topic, qid)] = max(table.get((topic, qid), 0), queues.get_max_offset(topic, qid))

    async def adopt_replicated(self, timeout: float) -> int:
        """Make records that came in by replication (`append_to_commit_log`) part of the queues puts continue:
        dispatch them all, then continue each queue after them. For a store that is about to take puts after
        replicating, such as a master restored from its slave. Returns the bytes still not dispatched when
        `timeout` ran out (0 when all were)."""
        deadline = time.monotonic() + timeout
        while self.reput.behind > 0 and time.monotonic() < deadline:
            self.reput.catch_up()
            if self.reput.behind > 0:
                await asyncio.sleep(0.05)
        self._continue_queues()
        return self.reput.behind

    async def truncate_running(self, offset: int) -> int:
        """Cut a running store that takes no puts (a SLAVE with no replication into it) back to CommitLog
        `offset`: the CommitLog, the ConsumeQueues and the index forget every record at or past it, and the
        next record (replicated or put) continues there. For a master deposed while it ran, whose tail no
        replica holds. Returns the CommitLog bytes dropped."""
        if self.config.broker_role != "SLAVE":
            raise StoreError("only a store that takes no puts can be cut while it runs")
        end = self.commit_log.max_offset
        if offset >= end:
            return 0
        self.reput.catch_up()  # the queues hold every record up to the end: the cut below sees them all
        loop = asyncio.get_running_loop()
        helper = self.index if isinstance(self.index, IndexProcess) else None
        if helper is not None:  # it indexes what it was told, flushes and exits; it restarts after the cut
            await loop.run_in_executor(None, helper.stop)
        self.commit_log.queue.truncate_dirty_files(offset)
        self.consume_queue_store.truncate_dirty(offset)
        if helper is not None:
            service = IndexService(
                self.config.index_dir, hash_slot_num=self.config.max_hash_slot_num, index_num=self.config.max_index_num
            )
            service.load(True)
            service.truncate_dirty(offset, self.commit_log.store_timestamp_at)
            self.index_service = self.index = service
            self.reput.set_index(batch=service)
        elif self.index_service is not None:
            self.index_service.truncate_dirty(offset, self.commit_log.store_timestamp_at)
        self.reput.dispatch_from(min(self.reput.reput_from_offset, offset))
        self.commit_log.topic_queue_table.clear()
        self._continue_queues()
        if helper is not None and self.index_service is not None:
            self._start_index_helper(self.index_service)
        self.commit_log.allocator.request_next()  # the prepared next file followed the old end
        log.warning("CommitLog cut from %d back to %d while running", end, offset)
        return end - offset

    def _flush_logics(self) -> int | None:
        """Flush the ConsumeQueues and the index; the store time the index covers when the helper writes it
        (it may lag dispatch), None when the index is written in step with dispatch."""
        self.consume_queue_store.flush()
        if isinstance(self.index, IndexProcess):
            return self.index.flush()
        if self.index is not None:
            self.index.flush()
        return None

    async def shutdown(self) -> None:
        """Stop accepting puts, dispatch and flush everything, write the checkpoint, remove `abort`."""
        if not self._running:
            return
        self._running = False
        self._update_put_path()
        assert self.flush_service and self.logics_flush and self.clean_service and self.checkpoint
        await self.clean_service.close()
        await self.reput.close()
        await self.logics_flush.close()
        loop = asyncio.get_running_loop()
        if isinstance(self.index, IndexProcess):  # it indexes everything dispatched, flushes, and exits
            await loop.run_in_executor(None, self.index.stop)
        await self.logics_flush.flush_once()  # writes the index's gathered records first
        await self.flush_service.close()  # flushes the whole CommitLog, answers every waiter
        await self.commit_log.allocator.close()
        if self.populator is not None:
            await loop.run_in_executor(None, self.populator.stop)
        checkpoint = self.checkpoint
        checkpoint.clean_shutdown_offset = self.commit_log.max_offset
        last = self.commit_log.queue.files[-1] if self.commit_log.queue.files else None
        if last is not None and last.store_timestamp:
            checkpoint.physic_msg_timestamp = last.store_timestamp
        await loop.run_in_executor(None, checkpoint.flush)
        self._close_files()
        self.config.abort_path.unlink(missing_ok=True)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _close_files(self) -> None:
        self.commit_log.queue.close()
        self.consume_queue_store.close()
        if self.index_service is not None:
            self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close()

    # -- put ------------------------------------------------------------------------------------------

    def _update_put_path(self) -> None:
        """Work out what puts get from what they depend on; called when any of it changes (start, shutdown,
        the disk filling or freed, an HA replica set). The role is the configured one: classic RocketMQ HA
        does not switch a broker's role while it runs."""
        if not self._running or self.config.broker_role == "SLAVE":
            self._refusal = PutStatus.SERVICE_NOT_AVAILABLE
        elif self.clean_service is not None and self.clean_service.disk_full:
            self._refusal = PutStatus.DISK_FULL
        else:
            self._refusal = None
        self._answer_at_once = self._refusal is None and self._replica is None and not self._sync

    def append(
        self, msgs: MessageToStore | list[MessageToStore] | BatchToStore, *, wait: bool = True, report: bool = False
    ) -> PutResult | asyncio.Future[PutResult]:
        """Append one message, or a batch (a list, or a producer's BatchToStore: same topic and queue,
        consecutive offsets), to the CommitLog now, with no coroutine per message: the send path's put.

        Returns the PutResult at once when nothing remains to wait for (ASYNC_FLUSH and no SYNC_MASTER
        slave to wait for, a refusal, or `wait=False`: the message's WAIT=false property, which answers
        before the flush and the slave as in RocketMQ); otherwise a future of it (SYNC_FLUSH group commit,
        SYNC_MASTER replica, or a roll to the next CommitLog file).

        `report=True`: `put_reporter` is told of what was stored in the same step as the append, before
        any wait and whether or not the file must roll first. The broker puts this way what its metrics
        must tell apart from a plain send (a delay's delivery, a commit, a retry, a typed send): they count
        plain sends from the ConsumeQueues, less these, so a plain send pays nothing for them.
        """
        if self._refusal is not None:
            return PutResult(self._refusal)
        if not report and type(msgs) is MessageToStore:  # the hottest case, written out
            result = self.commit_log.append_message(msgs)
            if result is None:
                return asyncio.ensure_future(self._roll_and_put(self._appender(msgs, False), wait))
            if self._answer_at_once and result.status is PUT_OK:
                return result  # _after_append's ASYNC_FLUSH case written out: a call less on the hottest path
            return self._after_append(result, wait)
        return self._append(self._appender(msgs, report), wait)

    async def put(
        self, msgs: MessageToStore | list[MessageToStore] | BatchToStore, *, report: bool = False
    ) -> PutResult:
        """`append`, awaited: the result once the message is as durable as the broker's flush and
        replication settings ask (or refused, or timed out waiting)."""
        result = self.append(msgs, report=report)
        return result if type(result) is PutResult else await result  # type: ignore[misc]

    def _appender(
        self, msgs: MessageToStore | list[MessageToStore] | BatchToStore, report: bool
    ) -> Callable[[], PutResult | None]:
        """The CommitLog append of `msgs` (None: the file must roll first), telling `put_reporter` when asked."""
        commit_log = self.commit_log
        if isinstance(msgs, BatchToStore):
            batch = msgs
            topic = batch.topic

            def append_producer_batch() -> PutResult | None:
                return commit_log.append_batch(batch)

            append = append_producer_batch
        elif isinstance(msgs, list):
            topic = msgs[0].topic if msgs else ""

            def append_batch() -> PutResult | None:
                return commit_log.append_messages(msgs)

            append = append_batch
        else:
            topic = msgs.topic

            def append_one() -> PutResult | None:
                return commit_log.append_message(msgs)

            append = append_one
        if not report:
            return append

        def append_reported() -> PutResult | None:
            result = append()
            if result is not None and result.status is PUT_OK and self.put_reporter is not None:
                self.put_reporter(topic, record_sizes(result))
            return result

        return append_reported

    def _append(self, append: Callable[[], PutResult | None], wait: bool) -> PutResult | asyncio.Future[PutResult]:
        """`append` now, or after rolling to the next CommitLog file when it answers None; then the wait."""
        result = append()
        if result is None:
            return asyncio.ensure_future(self._roll_and_put(append, wait))
        return self._after_append(result, wait)

    async def _roll_and_put(self, append: Callable[[], PutResult | None], wait: bool) -> PutResult:
        result = self._after_append(await self.commit_log.roll_and_retry(append), wait)
        return result if type(result) is PutResult else await result  # type: ignore[misc]

    def _after_append(self, result: PutResult, wait: bool) -> PutResult | asyncio.Future[PutResult]:
        if result.status is not PUT_OK:
            return result
        end = result.commit_log_offset + result.wrote_bytes
        replica = self._replica
        if replica is not None:
            replica.data_appended(end)
            if wait and self.config.broker_role == "SYNC_MASTER":
                if self._sync:
                    return asyncio.ensure_future(self._flush_then_replica(end, result, replica))
                return replica.wait_acked(end, result)
        if self._sync:
            assert self.flush_service is not None
            if not wait:
                self.flush_service.request_flush()
                return result
            return self.flush_service.wait_flushed(end, result)
        return result

    async def _flush_then_replica(self, end: int, result: PutResult, replica: Replica) -> PutResult:
        """SYNC_FLUSH and SYNC_MASTER: the group commit, then the slave's acknowledgement."""
        assert self.flush_service is not None
        await self.flush_service.wait_flushed(end, result)
        if result.status is not PUT_OK:
            return result
        acked = replica.wait_acked(end, result)
        return acked if type(acked) is PutResult else await acked  # type: ignore[misc]

    def set_replica(self, replica: Replica | None) -> None:
        """The HA master (broker.ha.master) on master brokers: told of new data, waited on by SYNC_MASTER."""
        self._replica = replica
        self._update_put_path()

    # -- get ------------------------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int = 256 * 1024,
        tags_filter: TagsFilter = None,
    ) -> GetResult:
        """Records of one queue from logical `offset`, filtered by tag hash code on the ConsumeQueue."""
        cqs = self.consume_queue_store
        cq = cqs.find(topic, queue_id)
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off = cq.get_min_offset()
        max_off = cq.get_max_offset()
        if max_off == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, min_off if min_off == 0 else max_off, min_off, max_off)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        buffers = result.buffers
        queue_offsets = result.queue_offsets
        min_phy = self.commit_log.min_offset
        find_file = self.commit_log.queue.find_mapped_file_by_offset
        # The CommitLog file of the last record read, as a view of it, its start and its written end: a
        # queue's next records are mostly in the same file, sliced here without a call per record (what
        # CommitLog.get_data would answer for them: tests/store/test_get_message_views.py)
        file_view: memoryview | None = None
        file_from = file_wrote = 0
        match_set = tags_filter if isinstance(tags_filter, set | frozenset) else None
        match_fn = tags_filter if callable(tags_filter) else None
        total = 0
        removing = False
        i = offset
        # look at a bounded number of units so that a filter matching nothing cannot spin for long
        scan_limit = offset + max(max_msg_nums, 1) * 16 + 800
        end = min(max_off, scan_limit)
        try:
            while i < end:
                units = cq.read_units(i, min(end - i, 256))
                if units is None:
                    break
                stop = False
                try:
                    for phy, size, tags_code in UNIT.iter_unpack(units):
                        i += 1
                        if size == BLANK_UNIT_SIZE:
                            continue
                        if phy < min_phy:
                            removing = True
                            continue
                        if match_set is not None and tags_code not in match_set:
                            continue
                        if match_fn is not None and not match_fn(tags_code, None):
                            continue
                        if buffers and total + size > max_total_bytes:
                            i -= 1
                            stop = True
                            break
                        rel = phy - file_from
                        if file_view is not None and 0 <= rel < file_wrote and rel + size <= file_wrote:
                            view = file_view[rel : rel + size]
                        else:
                            mf = find_file(phy)
                            found = None if mf is None else mf.select(phy - mf.file_from_offset, size)
                            if found is None:
                                removing = True
                                continue
                            view = found
                            assert mf is not None
                            if file_view is not None:
                                file_view.release()  # the views sliced from it stay valid
                            file_view = memoryview(mf.mm)
                            file_from, file_wrote = mf.file_from_offset, mf.wrote_position
                        buffers.append(view)
                        queue_offsets.append(i - 1)
                        total += size
                        if len(buffers) >= max_msg_nums:
                            stop = True
                            break
                finally:
                    units.release()
                if stop:
                    break
        finally:
            if file_view is not None:
                file_view.release()
        result.next_begin_offset = i
        result.total_size = total
        if buffers:
            result.status = GetStatus.FOUND
        elif removing:
            result.status = GetStatus.MESSAGE_WAS_REMOVING
        return result

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_store.find(topic, queue_id)
        return cq.get_max_offset() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_store.find(topic, queue_id)
        return cq.get_min_offset() if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self.consume_queue_store.find(topic, queue_id)
        return cq.get_offset_by_time(timestamp_ms, self._store_time_of) if cq is not None else 0

    def _store_time_of(self, phy: int, size: int) -> int:
        return self.commit_log.store_timestamp_at(phy)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.consume_queue_store.find(topic, queue_id)
        unit = cq.get_index(offset) if cq is not None else None
        return unit[0] if unit is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_store.find(topic, queue_id)
        if cq is None:
            return -1
        unit = cq.get_index(cq.get_min_offset())
        if unit is None:
            return -1
        msg = self.look_message_by_offset(unit[0])
        return msg.store_timestamp if msg is not None else -1

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        size = self.commit_log.record_size_at(commit_log_offset)
        if size <= 0:
            return None
        view = self.commit_log.get_data(commit_log_offset, size)
        if view is None:
            return None
        try:
            return bytes(view)
        finally:
            view.release()

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        raw = self.select_one_message_by_offset(commit_log_offset)
        return decode_record(raw) if raw is not None else None

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> QueryResult:
        result = QueryResult()
        index = self.index
        if index is None:
            return result
        self.reput.catch_up()  # every record put before the query is indexed, or announced to the helper
        found = index.query(topic, key, max_num, begin_ts, end_ts)
        result.index_last_update_timestamp = index.last_update_timestamp
        result.index_last_update_phy_offset = index.end_phy_offset
        min_phy = self.commit_log.min_offset
        for phy in found:
            if phy < min_phy:
                continue
            size = self.commit_log.record_size_at(phy)
            view = self.commit_log.get_data(phy, size) if size > 0 else None
            if view is not None:
                result.buffers.append(view)
        return result

    # -- queues ---------------------------------------------------------------------------------------

    def topics_and_queues(self) -> dict[str, list[int]]:
        return self.consume_queue_store.topics_and_queues()

    def delete_topics(self, names: set[str] | list[str]) -> None:
        self.consume_queue_store.delete_topics(list(names))
        for name in names:
            for key in [k for k in self.commit_log.topic_queue_table if k[0] == name]:
                del self.commit_log.topic_queue_table[key]

    def remove_expired_queues(self, keep: Callable[[str], bool]) -> list[tuple[str, int]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE (RocketMQ's cleanExpiredConsumerQueue): drop the ConsumeQueues whose
        messages are all gone from the CommitLog, with their queue offsets, so that such a queue restarts
        at offset 0 as in RocketMQ; topics `keep` accepts (the system topics) are left alone."""
        min_phy = self.commit_log.min_offset
        if min_phy <= 0:
            return []  # nothing has left the CommitLog
        removed = self.consume_queue_store.remove_expired_queues(min_phy, keep)
        for key in removed:
            self.commit_log.topic_queue_table.pop(key, None)
        return removed

    def remove_unused_topics(self, keep: Callable[[str], bool]) -> list[str]:
        """CLEAN_UNUSED_TOPIC (RocketMQ's cleanUnusedTopic): delete the ConsumeQueues (and queue offsets) of
        every topic `keep` refuses: the broker passes "has a topic config, or is a system topic"."""
        unused = sorted(t for t in self.consume_queue_store.topics_and_queues() if not keep(t))
        if unused:
            self.delete_topics(unused)
            log.info("deleted the consume queues of %d topics without a topic config: %s", len(unused), unused)
        return unused

    def clean_expired_consume_queue(self) -> None:
        min_phy = self.commit_log.min_offset
        if min_phy >= 0:
            self.consume_queue_store.clean_expired(min_phy)

    def _after_commit_log_delete(self, min_phy: int) -> None:
        self.consume_queue_store.clean_expired(min_phy)
        if self.index is not None:
            self.index.delete_expired(min_phy)

    # -- offsets and info -----------------------------------------------------------------------------

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return max(self.commit_log.min_offset, 0)

    @property
    def confirm_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.reput.behind

    def runtime_info(self) -> dict[str, str]:
        info: dict[str, Any] = {
            "commitLogMinOffset": self.min_phy_offset,
            "commitLogMaxOffset": self.max_phy_offset,
            "commitLogDiskFlushedOffset": self.commit_log.queue.flushed_where,
            "dispatchBehindBytes": self.reput.behind,
            "putMessageTimesTotal": 0,
            "flushDiskType": self.config.flush_disk_type,
        }
        if self.flush_service is not None:
            info["commitLogFlushCount"] = self.flush_service.flush_count
        return {k: str(v) for k, v in info.items()}

    def add_arrival_listener(self, callback: ArrivalListener) -> None:
        self.reput.add_arrival_listener(callback)

    # -- HA -------------------------------------------------------------------------------------------

    def get_commit_log_data(self, offset: int, max_bytes: int = -1) -> memoryview | None:
        """Raw CommitLog bytes from `offset` up to the end of what that file holds (at most `max_bytes`)."""
        view = self.commit_log.get_data(offset)
        if view is not None and 0 <= max_bytes < len(view):
            short = view[:max_bytes]
            view.release()
            return short
        return view

    async def append_to_commit_log(self, offset: int, data: bytes | memoryview) -> bool:
        """Slave side: append replicated bytes at exactly the end; dispatch follows (the CommitLog tells
        its sink, the reput service, which reads the records)."""
        return await self.commit_log.append_data(offset, data)
