"""The revive service: messages popped and not acked in time are handed out again.

One task per revive queue of `rmq_sys_REVIVE_LOG_<cluster>`, on a master. It reads the queue's records as the
timer service releases them (checkpoints 1 s before they are due, acks when they are due), keeps each
checkpoint with the offsets acked so far, and once a checkpoint is due and the timer has released every record
due before it, copies each unacked message to the pop-retry topic `%RETRY%<group>_<topic>` (queue 0,
reconsumeTimes + 1, same body and properties, so the message id stays), or to `%DLQ%<group>` once it was
reconsumed the group's retryMaxTimes. Its progress is the offset of group CID_RMQ_SYS_REVIVE_GROUP on each
revive queue, committed up to the oldest checkpoint not yet finished: after a kill -9 the queue is read again
from there, so nothing popped is lost (a message revived just before the crash may come twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.protocol.message import decode_record
from broker.protocol.pop import RETRY_FLAG_NORMAL, normal_topic, retry_flag, retry_topic
from broker.protocol.properties import Prop
from broker.server.pop.records import REVIVE_GROUP, AckRecord, CheckPoint, decode_record_body
from broker.server.timer_message import TIMER_TOPIC
from broker.server.topics import DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE
from broker.store.results import MessageToStore
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.server.pop.service import PopContext
    from broker.server.timer import TimerService

__all__ = ["ReviveService"]

log = logging.getLogger(__name__)

READ_BATCH = 32
#: A due checkpoint waits this long past its time for the acks the timer releases at that time.
ACK_GRACE_MS = 1000
FIRST_POP_TIME = "1ST_POP_TIME"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Pending:
    ck: CheckPoint
    queue_offset: int
    acked: set[int] = field(default_factory=set)


class ReviveService:
    def __init__(self, broker: PopContext, timer: TimerService, revive_topic_name: str) -> None:
        self.broker = broker
        self.timer = timer
        self.topic = revive_topic_name
        self.revived = 0
        self.dead_lettered = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.wakeup = asyncio.Event()
        self._barrier = 0  # the timer queue's end when the service started

    def start(self) -> None:
        if self._tasks:
            return
        self._barrier = self.broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run(q)) for q in range(self.broker.config.revive_queue_num)]

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []

    def _timer_released_until(self, ms: int) -> bool:
        """Whether the timer has put back every record due before `ms` (so every ack of a checkpoint due then).

        After a restart the timer first reads what was parked before it (the barrier); from then on it reads
        each parked record as it arrives, long before a checkpoint's acks are due."""
        t = self.timer
        if t.read_offset < self._barrier:
            return False
        return not t.pending or t.pending[0][0] > ms

    async def _run(self, qid: int) -> None:
        b = self.broker
        interval = b.config.revive_interval / 1000
        pending: dict[str, _Pending] = {}
        read_at = max(b.offsets.query(REVIVE_GROUP, self.topic, qid), 0)
        while True:
            if not b.config.is_master:  # controller mode made this broker a slave: the new master revives
                pending.clear()
                read_at = max(b.offsets.query(REVIVE_GROUP, self.topic, qid), 0)
                await asyncio.sleep(interval)
                continue
            try:
                read_at = self._read(qid, read_at, pending)
                await self._revive_due(pending)
                oldest = min((p.queue_offset for p in pending.values()), default=read_at)
                b.offsets.commit(REVIVE_GROUP, self.topic, qid, oldest)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("revive round on queue %d failed; retrying", qid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), interval)

    def _read(self, qid: int, offset: int, pending: dict[str, _Pending]) -> int:
        store = self.broker.store
        while True:
            got = store.get_message(REVIVE_GROUP, self.topic, qid, offset, READ_BATCH)
            try:
                if not got.buffers:
                    return max(offset, got.next_begin_offset) if got.next_begin_offset >= offset else offset
                for buf, qoff in zip(got.buffers, got.queue_offsets, strict=True):
                    msg = decode_record(buf)
                    record = decode_record_body(msg.tags, msg.body)
                    if record is None:
                        log.warning("skipping unreadable revive record at %s:%d:%d", self.topic, qid, qoff)
                    elif isinstance(record, CheckPoint):
                        pending.setdefault(record.key, _Pending(record, qoff))
                    else:
                        self._apply_ack(record, pending)
                offset = got.next_begin_offset
            finally:
                got.release()

    @staticmethod
    def _apply_ack(ack: AckRecord, pending: dict[str, _Pending]) -> None:
        entry = pending.get(ack.ck_key)
        if entry is None:
            return  # its checkpoint was revived already, or never written: nothing to hold back
        entry.acked.update(ack.offsets)

    async def _revive_due(self, pending: dict[str, _Pending]) -> None:
        now = _now_ms()
        for key, entry in sorted(pending.items(), key=lambda kv: kv[1].queue_offset):
            ck = entry.ck
            if ck.revive_time + ACK_GRACE_MS > now or not self._timer_released_until(ck.revive_time):
                continue
            if await self._revive(entry):
                del pending[key]

    async def _revive(self, entry: _Pending) -> bool:
        """Re-deliver the checkpoint's unacked messages; False when a put failed (tried again next round)."""
        b = self.broker
        ck = entry.ck
        group_cfg = b.groups.table.get(ck.group)
        original_topic = normal_topic(ck.topic, ck.group)
        if group_cfg is None or b.topics.get(original_topic) is None:
            return True  # the group or the topic is gone: nobody to deliver to
        for diff in ck.diffs:
            offset = ck.start_offset + diff
            if offset in entry.acked:
                continue
            got = b.store.get_message(ck.group, ck.topic, ck.queue_id, offset, 1, 1 << 30)
            try:
                if not got.buffers or got.queue_offsets[0] != offset:
                    log.warning("revive: %s:%d:%d is gone; skipping it", ck.topic, ck.queue_id, offset)
                    continue
                msg = decode_record(got.buffers[0])
            finally:
                got.release()
            props = dict(msg.properties)
            props.setdefault(FIRST_POP_TIME, str(ck.pop_time))
            to_dlq = msg.reconsume_times >= group_cfg.retry_max_times
            if to_dlq:
                target = DLQ_GROUP_TOPIC_PREFIX + ck.group
                b.topics.create_in_send_back(target, 1, PERM_WRITE)
                props.setdefault(Prop.DLQ_ORIGIN_TOPIC, original_topic)
                if Prop.UNIQ_KEY in props:
                    props.setdefault(Prop.DLQ_ORIGIN_MESSAGE_ID, props[Prop.UNIQ_KEY])
            else:
                v2 = retry_flag(ck.topic, ck.group) == 2 or (
                    retry_flag(ck.topic, ck.group) == RETRY_FLAG_NORMAL and b.config.enable_retry_topic_v2
                )
                target = retry_topic(ck.group, original_topic, v2=v2)
                b.topics.create_in_send_back(target, 1, PERM_READ | PERM_WRITE)
                if b.offsets.query(ck.group, target, 0) < 0:
                    b.offsets.commit(ck.group, target, 0, 0)
            copy = MessageToStore.from_stored(
                msg, topic=target, queue_id=0, properties=props, reconsume_times=msg.reconsume_times + 1
            )
            copy.born_host = (b.config.broker_ip1, b.config.listen_port)
            result = await b.store.put(copy)
            if not result.ok:
                log.warning(
                    "revive: putting %s:%d:%d to %s failed: %s", ck.topic, ck.queue_id, offset, target, result.status
                )
                return False
            entry.acked.add(offset)  # a retry of this checkpoint does not copy it twice
            if to_dlq:
                self.dead_lettered += 1
                log.info("popped message %s of group %s moved to %s", msg.msg_id, ck.group, target)
            else:
                self.revived += 1
        return True
