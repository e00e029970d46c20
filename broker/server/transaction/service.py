"""The transaction service: settles half messages (END_TRANSACTION) and checks forgotten ones.

`BrokerController` creates it, calls `load()` at start and runs `run()` on a master; the
END_TRANSACTION processor calls `end()`. State lives in the store and the offset table, not in a
side file: op messages (RMQ_SYS_TRANS_OP_HALF_TOPIC) say which half offsets are settled, and the
internal group CID_SYS_RMQ_TRANS keeps two offsets in consumerOffset.json: how far the half queue
is settled-or-superseded (the check progress) and from where the op queue must be re-read after a
restart. So a restart neither rechecks settled halves nor forgets pending ones.

A check (every transactionCheckInterval) walks the half queue from the progress offset. A half
older than transactionTimeOut (or its CHECK_IMMUNITY_TIME_IN_SECONDS) without an op is re-put as a
copy with TRANSACTION_CHECK_TIMES + 1 (Java's way: the count persists in the store and the old
offset is passed), and CHECK_TRANSACTION_STATE for the copy goes one-way to a live channel of its
producer group. A half checked transactionCheckMax times is rolled back (an op is written) and
logged. Halves younger than the timeout end the walk; immune ones are re-put to look again later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.protocol.message import MessageExt, decode_record
from broker.protocol.properties import Prop
from broker.server.errors import RequestError
from broker.server.put_rules import rewrite_for_delay
from broker.server.timer_message import TIMER_PROPERTIES, park_for_timer, timer_delivery
from broker.server.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from broker.server.transaction.messages import (
    LEGACY_TRANS_CHECK_GROUP,
    TRANS_CHECK_GROUP,
    check_request,
    commit_message,
    op_message,
    parse_op_body,
)
from broker.store.results import GetStatus, MessageToStore, PutResult, PutStatus
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.server.transaction.context import TransactionContext

__all__ = ["TransactionService"]

log = logging.getLogger(__name__)

HALF_QUEUE = 0
_READ_BATCH = 64


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionService:
    def __init__(self, broker: TransactionContext) -> None:
        self.broker = broker
        self.config = broker.config
        self.store = broker.store
        self.progress = 0  # every half offset below this is settled or superseded by a copy
        self.done: set[int] = set()  # half offsets >= progress that are settled or superseded
        self.settled_ids: set[str] = set()  # transaction ids with an op (commit or rollback)
        self.op_for: dict[int, int] = {}  # half offset -> op queue offset, for the op re-read point
        self.op_read = 0  # next op queue offset to read
        self.checks_sent = 0
        self._task: asyncio.Task[None] | None = None
        self._host = (broker.config.broker_ip1, broker.config.listen_port)

    # ------------------------------------------------------------------ state

    def load(self) -> None:
        offsets = self.broker.offsets

        def stored(topic: str) -> int:
            found = offsets.query(TRANS_CHECK_GROUP, topic, HALF_QUEUE)
            return found if found >= 0 else offsets.query(LEGACY_TRANS_CHECK_GROUP, topic, HALF_QUEUE)

        self.progress = max(stored(TRANS_HALF_TOPIC), 0)
        self.op_read = max(stored(TRANS_OP_HALF_TOPIC), 0)
        self.read_ops()
        log.info(
            "transaction state: half progress %d, %d settled above it, op queue read to %d",
            self.progress,
            len(self.done),
            self.op_read,
        )

    def _records(self, topic: str, offset: int) -> list[MessageExt]:
        got = self.store.get_message(TRANS_CHECK_GROUP, topic, HALF_QUEUE, offset, _READ_BATCH)
        try:
            if got.status is not GetStatus.FOUND:
                if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
                    raise _Moved(got.next_begin_offset)
                return []
            return [decode_record(view) for view in got.buffers]
        finally:
            got.release()

    def read_ops(self) -> None:
        """Take in op messages written since the last read (ours and any a peer wrote)."""
        while True:
            try:
                ops = self._records(TRANS_OP_HALF_TOPIC, self.op_read)
            except _Moved as moved:
                self.op_read = moved.offset
                continue
            if not ops:
                return
            for op in ops:
                tid = op.properties.get(Prop.TRANSACTION_ID)
                if tid:
                    self.settled_ids.add(tid)
                for half_offset in parse_op_body(op.body):
                    if half_offset >= self.progress:
                        self.done.add(half_offset)
                        self.op_for.setdefault(half_offset, op.queue_offset)
                self.op_read = op.queue_offset + 1

    def _advance(self) -> None:
        while self.progress in self.done:
            self.done.discard(self.progress)
            self.progress += 1
        self.done = {o for o in self.done if o >= self.progress}
        self.op_for = {h: o for h, o in self.op_for.items() if h >= self.progress}
        # Ops of halves not yet passed must be read again after a restart.
        op_restart = min(self.op_for.values(), default=self.op_read)
        offsets = self.broker.offsets
        offsets.commit(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE, self.progress)
        offsets.commit(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE, op_restart)

    # ------------------------------------------------------------------ END_TRANSACTION

    async def end(self, half: MessageExt, commit: bool, from_check: bool) -> PutStatus:
        """Commit (store the visible message) or roll back, then write the op. Idempotent per
        transaction id: a second END for a settled transaction changes nothing."""
        tid = half.properties.get(Prop.TRANSACTION_ID) or half.properties.get(Prop.UNIQ_KEY) or ""
        if (tid and tid in self.settled_ids) or half.queue_offset in self.op_for:
            log.info("transaction %s is already settled; END_TRANSACTION ignored", tid)
            return PutStatus.PUT_OK
        if tid:
            self.settled_ids.add(tid)  # before any await: a concurrent END must not commit twice
        if commit:
            msg = commit_message(half)
            if Prop.DELAY in msg.properties:
                rewrite_for_delay(msg, msg.properties, len(self.config.delay_levels_ms))
            if msg.topic == half.properties.get(Prop.REAL_TOPIC) and any(p in msg.properties for p in TIMER_PROPERTIES):
                # a delivery time applies from the commit on, as a delay level does (checked at the send)
                try:
                    deliver_ms = timer_delivery(
                        msg.properties,
                        time.time_ns() // 1_000_000,
                        enabled=self.config.timer_wheel_enable,
                        max_delay_sec=self.config.timer_max_delay_sec,
                    )
                except RequestError as exc:
                    log.warning("transaction %s: %s; delivered now", tid, exc.remark)
                    deliver_ms = None
                if deliver_ms is not None:
                    park_for_timer(msg, msg.properties, deliver_ms)
            result = await self.store.put(msg, report=True)  # the commit: counted at the send (metrics)
            if not result.ok:
                self.settled_ids.discard(tid)
                return result.status
            self.broker.schedule_wakeup()
        await self._write_op(half, tid)
        log.info(
            "transaction %s %s%s (half offset %d)",
            tid,
            "committed" if commit else "rolled back",
            " after a check" if from_check else "",
            half.queue_offset,
        )
        return PutStatus.PUT_OK

    async def _write_op(self, half: MessageExt, tid: str) -> PutResult:
        op = op_message(half.queue_offset, half.queue_id, self._host, _now_ms())
        if tid:
            op.properties[Prop.TRANSACTION_ID] = tid
        result = await self.store.put(op)
        if result.ok:
            self.done.add(half.queue_offset)
            self.op_for.setdefault(half.queue_offset, result.queue_offset)
        else:
            log.warning("writing the op message of half offset %d failed: %s", half.queue_offset, result.status.name)
        return result

    # ------------------------------------------------------------------ checks

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self._advance()

    async def _run(self) -> None:
        interval = self.config.transaction_check_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction check round failed; retrying next interval")

    async def check_round(self, now_ms: int | None = None) -> int:
        """One walk over the pending halves; returns how many checks were sent."""
        self.read_ops()
        now = _now_ms() if now_ms is None else now_ms
        timeout = self.config.transaction_time_out
        end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE)
        offset = self.progress
        sent = 0
        while offset < end:
            try:
                batch = self._records(TRANS_HALF_TOPIC, offset)
            except _Moved as moved:  # expired files: those halves are gone
                self.done.update(range(offset, moved.offset))
                offset = moved.offset
                continue
            if not batch:
                break
            stop = False
            for half in batch:
                if half.queue_offset >= end:
                    stop = True
                    break
                offset = half.queue_offset + 1
                outcome = await self._check_one(half, now, timeout)
                if outcome is None:
                    stop = True  # younger than the timeout: so is everything after it
                    break
                sent += outcome
            if stop:
                break
        self._advance()
        return sent

    async def _check_one(self, half: MessageExt, now: int, timeout: int) -> int | None:
        """0 or 1 checks sent for this half; None when it is too young (the walk stops)."""
        at = half.queue_offset
        props = half.properties
        tid = props.get(Prop.TRANSACTION_ID) or props.get(Prop.UNIQ_KEY) or ""
        if at in self.done or (tid and tid in self.settled_ids):
            self.done.add(at)
            return 0
        age = now - half.born_timestamp
        immunity_text = props.get(Prop.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if immunity_text is None:
            if 0 <= age < timeout:
                return None
        else:
            immunity = _immunity_ms(immunity_text, timeout)
            if age < immunity:
                # Keep it for later without holding the walk: a copy goes to the end of the queue.
                await self._renew(half, int(props.get(Prop.TRANSACTION_CHECK_TIMES, "0")))
                return 0
        times = int(props.get(Prop.TRANSACTION_CHECK_TIMES, "0") or 0)
        if times >= self.config.transaction_check_max:
            log.warning(
                "transaction %s of producer group %s (topic %s) is still unknown after %d checks; rolling it back",
                tid,
                props.get(Prop.PGROUP),
                props.get(Prop.REAL_TOPIC),
                times,
            )
            self.settled_ids.add(tid)
            await self._write_op(half, tid)
            return 0
        copy = await self._renew(half, times + 1)
        if copy is None:
            return 0
        group = props.get(Prop.PGROUP, "")
        conn = self.broker.producers.any_channel(group)
        if conn is None:
            log.info("no live producer of group %s to check transaction %s (check %d counted)", group, tid, times + 1)
            return 0
        try:
            await conn.invoke_oneway(check_request(copy))
        except Exception as exc:  # the channel is closing: the next round counts another check
            log.info("sending the check of transaction %s to %s failed: %s", tid, conn.peer, exc)
            return 0
        self.checks_sent += 1
        return 1

    async def _renew(self, half: MessageExt, check_times: int) -> MessageExt | None:
        """Re-put a half message (new offset, same content, updated check count); the old offset
        counts as passed. Returns the copy as stored, or None when the store refused it."""
        props = dict(half.properties)
        props[Prop.TRANSACTION_CHECK_TIMES] = str(check_times)
        props.setdefault(Prop.TRAN_PREPARED_QUEUE_OFFSET, str(half.queue_offset))
        msg = MessageToStore.from_stored(half, topic=TRANS_HALF_TOPIC, queue_id=HALF_QUEUE, properties=props)
        result = await self.store.put(msg)
        if not result.ok:
            log.warning("re-putting half message %d failed: %s", half.queue_offset, result.status.name)
            return None
        self.done.add(half.queue_offset)
        return MessageExt(
            topic=TRANS_HALF_TOPIC,
            body=half.body,
            properties=props,
            flag=half.flag,
            queue_id=HALF_QUEUE,
            sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            store_timestamp=result.store_timestamp,
            store_host=self.store.store_host,
            reconsume_times=half.reconsume_times,
            queue_offset=result.queue_offset,
            commit_log_offset=result.commit_log_offset,
        )


def _immunity_ms(text: str, timeout: int) -> int:
    try:
        return max(int(text) * 1000, timeout)
    except ValueError:
        return timeout


class _Moved(Exception):
    """The requested offset is gone (expired) or beyond the end: continue from `offset`."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset
