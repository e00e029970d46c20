"""PopService: POP, ACK, CHANGE_MESSAGE_INVISIBLETIME, PEEK and NOTIFICATION as operations of the broker.

The remoting processors (pop/processors.py) and the gRPC endpoint call these coroutines; refusals raise
`RequestError` with RocketMQ's remoting code and remark (reference A.3-A.5). A pop reads each queue under a
try-lock, writes one checkpoint per queue read to the revive topic (records.py) and, once it is stored, moves
the group's offset past what it handed out: a POP offset means "next to hand out". What is never acked comes
back through the pop-retry topic (revive.py). Orderly pops keep their state in order.py instead.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from broker.filter import SqlFilter
from broker.protocol.codes import ResponseCode
from broker.protocol.message import MessageExt, decode_record, encode_record
from broker.protocol.pop import (
    ORDER_REVIVE_QID,
    RETRY_FLAG_NORMAL,
    RETRY_FLAG_V1,
    RETRY_FLAG_V2,
    ExtraInfo,
    msg_offset_info,
    normal_topic,
    order_count_info,
    parse_extra_info,
    real_topic,
    retry_topic,
    revive_topic,
    start_offset_info,
)
from broker.server.clients import parse_sub_string
from broker.server.errors import RequestError
from broker.server.pop.order import OrderInfoManager
from broker.server.pop.polling import PopWaiters
from broker.server.pop.records import CK_LEAD_MS, AckRecord, CheckPoint, revive_message
from broker.server.property_filter import compile_subscription, get_filtered
from broker.server.topics import PERM_READ
from broker.store.results import GetResult

if TYPE_CHECKING:
    from broker.protocol.bodies import TopicConfig
    from broker.server.config import BrokerConfig
    from broker.server.group_pull_counters import GroupGetStats
    from broker.server.groups import SubscriptionGroupConfig, SubscriptionGroupManager
    from broker.server.message_counters import BrokerStats
    from broker.server.offsets import ConsumerOffsetManager
    from broker.server.topics import TopicConfigManager
    from broker.store import MessageStore

__all__ = ["MAX_POP_NUMS", "ChangeResult", "PopContext", "PopResult", "PopService", "PoppedMessage"]

log = logging.getLogger(__name__)

MAX_POP_NUMS = 32
#: How late a pop may arrive after its born time plus poll time before it is refused (RocketMQ's 500 ms).
POLL_LATE_MS = 500
POP_CK = "POP_CK"
#: Longest a pop or notification stays parked, whatever pollTime it asks (a client gone meanwhile holds a slot
#: of maxPopPollingSize no longer than this); the client pops again.
MAX_POLL_MS = 60_000
#: Most (group, topic) pairs remembered for the first-pop log line.
SEEN_LIMIT = 10_000
FIRST_POP_TIME = "1ST_POP_TIME"


class PopContext(Protocol):
    """What POP reads of the broker."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def get_stats(self) -> GroupGetStats: ...


_PHY_OFFSET = struct.Struct(">q")
#: Where a stored record keeps its commit-log offset: after totalSize, magic, bodyCRC, queueId, flag, queueOffset.
_PHY_OFFSET_AT = 28


@dataclass(slots=True)
class PoppedMessage:
    """One message handed out: its record as the remoting reply carries it, and its handle. `message` is
    decoded when first asked for (the remoting reply needs only the record)."""

    record: bytes
    extra_info: str
    real_topic: str
    queue_id: int
    queue_offset: int
    #: an orderly pop's count of earlier deliveries (orderCountInfo); None otherwise
    order_count: int | None = None
    _message: MessageExt | None = None

    @property
    def message(self) -> MessageExt:
        if self._message is None:
            self._message = decode_record(self.record)
        return self._message

    @property
    def commit_log_offset(self) -> int:
        return int(_PHY_OFFSET.unpack_from(self.record, _PHY_OFFSET_AT)[0])

    @property
    def reconsume_times(self) -> int:
        """For orderly pops the orderCountInfo count, else the stored reconsumeTimes."""
        return self.order_count if self.order_count is not None else self.message.reconsume_times


@dataclass(slots=True)
class PopResult:
    status: str  # FOUND | POLLING_TIMEOUT | POLLING_FULL
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    messages: list[PoppedMessage] = field(default_factory=list)
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""


@dataclass(slots=True)
class ChangeResult:
    pop_time: int
    invisible_time: int
    revive_qid: int
    extra_info: str


@dataclass(slots=True)
class _Filter:
    codes: set[int]
    sql: SqlFilter | None


@dataclass(slots=True)
class _Batch:
    """What one pop collects across queues."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    order: bool
    attempt_id: str | None
    messages: list[PoppedMessage] = field(default_factory=list)
    starts: list[tuple[int, int, int]] = field(default_factory=list)
    offsets: list[tuple[int, int, list[int]]] = field(default_factory=list)
    counts: list[tuple[int, int, int, int]] = field(default_factory=list)
    rest: int = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _int(value: object, name: str) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"{name} is not a number: {str(value)[:40]!r}") from None


class PopService:
    def __init__(self, broker: PopContext, order: OrderInfoManager) -> None:
        self.broker = broker
        self.config = broker.config
        self.order = order
        self.waiters = PopWaiters(self.config.pop_polling_size, self.config.max_pop_polling_size)
        self.revive_topic = revive_topic(self.config.broker_cluster_name)
        self._revive_counter = itertools.count()
        self._locked: set[str] = set()
        # (group, topic) pairs that popped: the first pop of each is logged
        self._seen: set[tuple[str, str]] = set()
        # set by PopParts: (topic, group, clientId, strategy, messageModel) -> assignments
        self.assigner: Callable[[str, str, str, str, str], list[tuple[int, str]] | None] | None = None

    # ------------------------------------------------------------------ checks

    def _check_topic_group(self, group: str, topic: str, queue_id: int, *, what: str) -> TopicConfig:
        b = self.broker
        if not self.config.broker_permission & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the broker[{self.config.broker_ip1}] {what} message is forbidden"
            )
        tc = b.topics.get(topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.readable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] {what} message is forbidden")
        if queue_id >= tc.read_queue_nums:
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        cfg = b.groups.find(group)
        if cfg is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not cfg.consume_enable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return tc

    def _filter(self, exp_type: str | None, exp: str | None) -> _Filter:
        sql = compile_subscription(exp_type, exp, self.config.enable_property_filter)
        if sql is not None:
            return _Filter(set(), sql)
        return _Filter(parse_sub_string(exp)[1], None)

    def _retry_topics(self, group: str, topic: str) -> list[tuple[str, int]]:
        """The pop-retry topics a pop reads, in order: the configured flavour, then v1 when switched to v2."""
        if self.config.enable_retry_topic_v2:
            topics = [(retry_topic(group, topic, v2=True), RETRY_FLAG_V2)]
            if self.config.retrieve_message_from_pop_retry_topic_v1:
                topics.append((retry_topic(group, topic), RETRY_FLAG_V1))
            return topics
        return [(retry_topic(group, topic), RETRY_FLAG_V1)]

    # ------------------------------------------------------------------ POP

    async def pop(
        self,
        *,
        group: str,
        topic: str,
        queue_id: int = -1,
        max_nums: int = MAX_POP_NUMS,
        invisible_ms: int = 60_000,
        poll_ms: int = 0,
        init_mode: int = 0,
        exp_type: str | None = "TAG",
        exp: str | None = "*",
        order: bool = False,
        attempt_id: str | None = None,
        born_ms: int | None = None,
    ) -> PopResult:
        """Hand out up to `max_nums` messages of `topic` (RequestError when refused, reference A.3)."""
        now = _now_ms()
        born = born_ms or now
        if now - born - poll_ms > POLL_LATE_MS:
            raise RequestError(
                ResponseCode.POLLING_TIMEOUT, f"the broker[{self.config.broker_ip1}] pop message is timeout too much"
            )
        if not self.config.broker_permission & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the broker[{self.config.broker_ip1}] pop message is forbidden"
            )
        if max_nums > MAX_POP_NUMS:
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{self.config.broker_ip1}] pop message's num is greater than 32",
            )
        if max_nums <= 0:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"maxMsgNums {max_nums} is not positive")
        if invisible_ms <= 0:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"invisibleTime {invisible_ms} is not positive")
        if not self.config.timer_wheel_enable:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"the broker[{self.config.broker_ip1}] pop message is forbidden because timerWheelEnable is false",
            )
        self._check_topic_group(group, topic, queue_id, what="pop")
        filt = self._filter(exp_type, exp)
        if (group, topic) not in self._seen and len(self._seen) < SEEN_LIMIT:
            self._seen.add((group, topic))
            log.info("group %s pops topic %s (order=%s)", group, topic, order)
        deadline = born + min(poll_ms, MAX_POLL_MS)
        watch = [topic] + [t for t, _f in self._retry_topics(group, topic)]
        while True:
            batch = await self._pop_once(
                group, topic, queue_id, max_nums, invisible_ms, init_mode, filt, order, attempt_id
            )
            if batch.messages:
                return self._result("FOUND", batch)
            remaining = deadline - _now_ms()
            if remaining <= 0 or self.waiters.closed:
                return self._result("POLLING_TIMEOUT", batch)
            if self.waiters.full(watch):
                return self._result("POLLING_FULL", batch)
            await self.waiters.wait(watch, group, queue_id, remaining / 1000)

    @staticmethod
    def _result(status: str, batch: _Batch) -> PopResult:
        return PopResult(
            status=status,
            pop_time=batch.pop_time,
            invisible_time=batch.invisible_time,
            revive_qid=batch.revive_qid,
            rest_num=batch.rest,
            messages=batch.messages,
            start_offset_info=start_offset_info(batch.starts),
            msg_offset_info=msg_offset_info(batch.offsets),
            order_count_info=order_count_info(batch.counts, []) if batch.order else "",
        )

    async def _pop_once(
        self,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_ms: int,
        init_mode: int,
        filt: _Filter,
        order: bool,
        attempt_id: str | None,
    ) -> _Batch:
        b = self.broker
        revive_qid = ORDER_REVIVE_QID if order else next(self._revive_counter) % self.config.revive_queue_num
        batch = _Batch(_now_ms(), invisible_ms, revive_qid, order, attempt_id)
        retry_first = not order and random.randrange(100) < self.config.pop_from_retry_probability
        if retry_first:
            await self._pop_retry(group, topic, max_nums, init_mode, filt, batch)
        tc = b.topics.get(topic)
        if tc is not None:
            if queue_id >= 0:
                queues = [queue_id]
            else:
                start = random.randrange(max(tc.read_queue_nums, 1))
                queues = [(start + i) % tc.read_queue_nums for i in range(tc.read_queue_nums)]
            for qid in queues:
                if len(batch.messages) >= max_nums:
                    break
                await self._pop_queue(group, topic, qid, RETRY_FLAG_NORMAL, max_nums, init_mode, filt, batch)
        if not order and not retry_first and len(batch.messages) < max_nums:
            await self._pop_retry(group, topic, max_nums, init_mode, filt, batch)
        return batch

    async def _pop_retry(
        self, group: str, topic: str, max_nums: int, init_mode: int, filt: _Filter, batch: _Batch
    ) -> None:
        for retry, flag in self._retry_topics(group, topic):
            if len(batch.messages) >= max_nums:
                return
            tc = self.broker.topics.get(retry)
            if tc is None:
                continue
            before = len(batch.messages)
            for qid in range(tc.read_queue_nums):
                await self._pop_queue(group, retry, qid, flag, max_nums, init_mode, filt, batch)
            if len(batch.messages) > before:
                return  # one retry flavour per pop

    def _start_offset(self, group: str, topic: str, queue_id: int, init_mode: int, is_retry: bool) -> int:
        """The group's offset on the queue; a first pop starts at the minimum (MIN, retry topics) or the end."""
        b = self.broker
        store = b.store
        min_off = store.get_min_offset_in_queue(topic, queue_id)
        max_off = store.get_max_offset_in_queue(topic, queue_id)
        offset = b.offsets.query(group, topic, queue_id)
        if offset < 0:
            if init_mode == 0 or is_retry:
                offset = min_off
            elif self.config.init_pop_offset_by_check_msg_in_mem and min_off == 0:
                offset = 0  # the whole queue is still held: a new group reads it from the start
            else:
                offset = max(max_off - 1, 0)
            if self.config.is_master:
                b.offsets.commit(group, topic, queue_id, offset)
        elif offset < min_off or offset > max_off:
            offset = min_off if offset < min_off else max_off
            if self.config.is_master:
                b.offsets.commit(group, topic, queue_id, offset)
        return offset

    def _read(self, group: str, topic: str, queue_id: int, offset: int, nums: int, filt: _Filter) -> GetResult:
        max_bytes = self.config.max_transfer_bytes_on_message_in_memory
        # retry copies keep their TAGS and properties: the same filter applies to them
        if filt.sql is not None:
            return get_filtered(self.broker.store, group, topic, queue_id, offset, nums, max_bytes, filt.sql)
        tags = set(filt.codes) if filt.codes else None
        return self.broker.store.get_message(group, topic, queue_id, offset, nums, max_bytes, tags)

    async def _pop_queue(
        self,
        group: str,
        topic: str,
        queue_id: int,
        flag: int,
        max_nums: int,
        init_mode: int,
        filt: _Filter,
        batch: _Batch,
    ) -> None:
        b = self.broker
        lock = f"{topic}@{group}@{queue_id}"
        max_off = b.store.get_max_offset_in_queue(topic, queue_id)
        if lock in self._locked:
            batch.rest += max(max_off - max(b.offsets.query(group, topic, queue_id), 0), 0)
            return
        self._locked.add(lock)
        try:
            offset = self._start_offset(group, topic, queue_id, init_mode, flag != RETRY_FLAG_NORMAL)
            want = max_nums - len(batch.messages)
            replay = False
            if batch.order:
                last = self.order.get(topic, group, queue_id)
                if last is not None and last.offsets and not last.offsets[0] <= offset <= last.offsets[-1] + 1:
                    self.order.clear(topic, group, queue_id)  # the offset was reset (resetOffset): it wins
                state = self.order.check(topic, group, queue_id, batch.attempt_id, batch.pop_time)
                if state == "blocked":
                    batch.rest += max(max_off - offset, 0)
                    return
                replay = state == "replay"
                if replay:
                    last = self.order.get(topic, group, queue_id)
                    assert last is not None
                    offset, want = last.offsets[0], len(last.offsets)
            got = self._read(group, topic, queue_id, offset, want, filt)
            try:
                records = [bytes(buf) for buf in got.buffers]
                offsets = list(got.queue_offsets)
                next_begin = got.next_begin_offset
            finally:
                got.release()
            batch.rest += max(max_off - next_begin, 0)
            if not records:
                if next_begin > offset and not batch.order and self.config.is_master:
                    b.offsets.commit(group, topic, queue_id, next_begin)  # skipped past messages the filter drops
                return
            if batch.order:
                counts = self.order.update(
                    topic,
                    group,
                    queue_id,
                    batch.pop_time,
                    batch.invisible_time,
                    offsets,
                    batch.attempt_id,
                    replay=replay,
                )
                b.offsets.commit(group, topic, queue_id, offset)
                for off in offsets:
                    batch.counts.append((flag, queue_id, off, counts[off]))
            else:
                ck = CheckPoint(
                    start_offset=offset,
                    pop_time=batch.pop_time,
                    invisible_time=batch.invisible_time,
                    queue_id=queue_id,
                    topic=topic,
                    group=group,
                    broker_name=self.config.broker_name,
                    diffs=[o - offset for o in offsets],
                )
                if not await self._put_ck(ck, batch.revive_qid):
                    return  # not handed out: the offset stays, the next pop reads them again
                b.offsets.commit(group, topic, queue_id, next_begin)
                counts = {}
            batch.starts.append((flag, queue_id, offset))
            batch.offsets.append((flag, queue_id, offsets))
            # counted as pulls are: statsAll, consumerProgress and the metrics' messages out read them
            b.stats.get(len(records))
            b.get_stats.pulled(group, topic, queue_id, len(records), sum(map(len, records)), next_begin)
            original = normal_topic(topic, group)
            for raw, off in zip(records, offsets, strict=True):
                info = ExtraInfo(
                    offset,
                    batch.pop_time,
                    batch.invisible_time,
                    batch.revive_qid,
                    flag,
                    self.config.broker_name,
                    queue_id,
                    off,
                )
                popped = PoppedMessage(raw, str(info), topic, queue_id, off, counts[off] if batch.order else None)
                if flag != RETRY_FLAG_NORMAL:
                    # the consumer sees the topic it subscribed to; the handle says where to ack
                    msg = popped.message
                    msg.topic = original
                    msg.properties[POP_CK] = str(info)
                    popped.record = encode_record(msg)
                batch.messages.append(popped)
        finally:
            self._locked.discard(lock)

    async def _put_revive(self, record: CheckPoint | AckRecord, revive_qid: int, deliver_ms: int) -> bool:
        c = self.config
        msg = revive_message(
            record,
            revive_topic_name=self.revive_topic,
            revive_qid=revive_qid,
            deliver_ms=deliver_ms,
            now_ms=_now_ms(),
            store_host=(c.broker_ip1, c.listen_port),
        )
        result = await self.broker.store.put(msg)
        if not result.ok:
            log.warning("writing a %s record to %s failed: %s", type(record).__name__, self.revive_topic, result.status)
        return bool(result.ok)

    async def _put_ck(self, ck: CheckPoint, revive_qid: int) -> bool:
        return await self._put_revive(ck, revive_qid, ck.revive_time - CK_LEAD_MS)

    # ------------------------------------------------------------------ ACK / CHANGE

    def _check_ack(self, topic: str, queue_id: int, offset: int, *, change: bool) -> None:
        b = self.broker
        tc = b.topics.get(topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        min_off = b.store.get_min_offset_in_queue(topic, queue_id)
        max_off = b.store.get_max_offset_in_queue(topic, queue_id)
        if offset < min_off or offset > max_off or (change and offset == max_off):
            raise RequestError(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{min_off},{max_off}",
            )

    @staticmethod
    def _parse(extra_info: str) -> ExtraInfo:
        try:
            return parse_extra_info(extra_info)
        except ValueError as exc:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"extraInfo is illegal: {exc}") from None

    async def ack(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> None:
        """Ack one handed-out message (reference A.5); `topic` is the real topic (the pop-retry one for retries)."""
        info = self._parse(extra_info)
        self._check_ack(topic, queue_id, offset, change=False)
        if info.is_order:
            self._ack_order(group, topic, queue_id, offset, info.pop_time)
            return
        ack = AckRecord([offset], info.ck_offset, group, topic, queue_id, info.pop_time, info.broker_name)
        await self._put_revive(ack, info.revive_qid, info.pop_time + info.invisible_time)

    def _ack_order(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int) -> None:
        b = self.broker
        if offset < b.offsets.query(group, topic, queue_id):
            return  # already behind the committed offset: a late duplicate
        try:
            commit = self.order.ack(topic, group, queue_id, offset, pop_time)
        except ValueError as exc:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
        if commit is not None:
            b.offsets.commit(group, topic, queue_id, commit)
            self.waiters.notify(topic)  # the queue may be free for the next batch

    async def batch_ack(self, broker_name: str, acks: list[dict[str, object]]) -> None:
        """BATCH_ACK_MESSAGE's entries `{c, t, r, so, q, rq, pt, it, b}` (b: acked positions from `so`)."""
        if not acks:
            raise RequestError(ResponseCode.NO_MESSAGE, "no ack in the batch")
        for entry in acks:
            group = str(entry.get("c") or "")
            flag = _int(entry.get("r", 0), "r")
            topic = real_topic(str(entry.get("t") or ""), group, flag)
            queue_id = _int(entry.get("q"), "q")
            start = _int(entry.get("so"), "so")
            revive_qid = _int(entry.get("rq"), "rq")
            pop_time = _int(entry.get("pt"), "pt")
            invisible = _int(entry.get("it"), "it")
            bits = entry.get("b")
            if not isinstance(bits, list):
                raise RequestError(ResponseCode.INVALID_PARAMETER, "b is not a list of positions")
            offsets = [start + _int(i, "b") for i in bits]
            if not offsets:
                continue
            for off in offsets:
                self._check_ack(topic, queue_id, off, change=False)
            if revive_qid == ORDER_REVIVE_QID:
                for off in offsets:
                    self._ack_order(group, topic, queue_id, off, pop_time)
                continue
            rec = AckRecord(offsets, start, group, topic, queue_id, pop_time, broker_name, batch=True)
            await self._put_revive(rec, revive_qid, pop_time + invisible)

    async def change_invisible(
        self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str, invisible_ms: int
    ) -> ChangeResult:
        """Make one handed-out message visible again `invisible_ms` from now (reference A.5)."""
        info = self._parse(extra_info)
        self._check_ack(topic, queue_id, offset, change=True)
        now = _now_ms()
        if info.is_order:
            self.order.change_invisible(topic, group, queue_id, offset, info.pop_time, now + invisible_ms)
            new_invisible = now + invisible_ms - info.pop_time
            handle = ExtraInfo(
                info.ck_offset,
                info.pop_time,
                new_invisible,
                info.revive_qid,
                info.flag,
                info.broker_name,
                queue_id,
                offset,
            )
            return ChangeResult(info.pop_time, new_invisible, info.revive_qid, str(handle))
        ck = CheckPoint(offset, now, invisible_ms, queue_id, topic, group, info.broker_name, diffs=[0])
        if not await self._put_ck(ck, info.revive_qid):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "writing the new checkpoint failed")
        ack = AckRecord([offset], info.ck_offset, group, topic, queue_id, info.pop_time, info.broker_name)
        await self._put_revive(ack, info.revive_qid, info.pop_time + info.invisible_time)
        handle = ExtraInfo(offset, now, invisible_ms, info.revive_qid, info.flag, info.broker_name, queue_id, offset)
        return ChangeResult(now, invisible_ms, info.revive_qid, str(handle))

    # ------------------------------------------------------------------ PEEK / NOTIFICATION / POLLING_INFO

    def peek(self, *, group: str, topic: str, queue_id: int, max_nums: int) -> PopResult:
        """Messages a pop would hand out next, without a checkpoint; status FOUND or NO_MESSAGE."""
        if max_nums > MAX_POP_NUMS or max_nums <= 0:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"maxMsgNums {max_nums} is not in 1..32")
        tc = self._check_topic_group(group, topic, queue_id, what="peek")
        batch = _Batch(_now_ms(), 0, 0, False, None)
        queues = [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums))
        for qid in queues:
            want = max_nums - len(batch.messages)
            if want <= 0:
                break
            offset = self.broker.offsets.query(group, topic, qid)
            if offset < 0:
                offset = self.broker.store.get_min_offset_in_queue(topic, qid)
            got = self._read(group, topic, qid, offset, want, _Filter(set(), None))
            try:
                for buf, off in zip(got.buffers, got.queue_offsets, strict=True):
                    batch.messages.append(PoppedMessage(bytes(buf), "", topic, qid, off))
                if got.queue_offsets:
                    batch.starts.append((RETRY_FLAG_NORMAL, qid, offset))
                    batch.offsets.append((RETRY_FLAG_NORMAL, qid, list(got.queue_offsets)))
            finally:
                got.release()
        return self._result("FOUND" if batch.messages else "NO_MESSAGE", batch)

    def _has_message(self, group: str, topic: str, queue_id: int, order: bool, attempt_id: str | None) -> bool:
        b = self.broker
        tc = b.topics.get(topic)
        if tc is None:
            return False
        now = _now_ms()
        queues = [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums))
        for qid in queues:
            if order and self.order.check(topic, group, qid, attempt_id, now) == "blocked":
                continue
            committed = b.offsets.query(group, topic, qid)
            if committed < 0:
                committed = b.store.get_min_offset_in_queue(topic, qid)
            if b.store.get_max_offset_in_queue(topic, qid) > committed:
                return True
        if order:
            return False
        for retry, _flag in self._retry_topics(group, topic):
            rtc = b.topics.get(retry)
            if rtc is None:
                continue
            for qid in range(rtc.read_queue_nums):
                committed = max(b.offsets.query(group, retry, qid), 0)
                if b.store.get_max_offset_in_queue(retry, qid) > committed:
                    return True
        return False

    async def notification(
        self,
        *,
        group: str,
        topic: str,
        queue_id: int,
        poll_ms: int,
        born_ms: int | None = None,
        order: bool = False,
        attempt_id: str | None = None,
    ) -> tuple[bool, bool]:
        """(hasMsg, pollingFull): whether a pop would find something, waiting up to `poll_ms` for it."""
        now = _now_ms()
        born = born_ms or now
        if now - born - poll_ms > POLL_LATE_MS:
            raise RequestError(
                ResponseCode.POLLING_TIMEOUT,
                f"the broker[{self.config.broker_ip1}] pop message is timeout too much",
            )
        self._check_topic_group(group, topic, queue_id, what="pop")
        deadline = born + min(poll_ms, MAX_POLL_MS)
        watch = [topic] + [t for t, _f in self._retry_topics(group, topic)]
        while True:
            if self._has_message(group, topic, queue_id, order, attempt_id):
                return True, False
            remaining = deadline - _now_ms()
            if remaining <= 0 or self.waiters.closed:
                return False, False
            if self.waiters.full(watch):
                return False, True
            await self.waiters.wait(watch, group, queue_id, remaining / 1000)

    def polling_info(self, *, group: str, topic: str, queue_id: int) -> int:
        """How many pops of `group` are parked on the queue."""
        self._check_topic_group(group, topic, queue_id, what="pop")
        return self.waiters.count(topic, group, queue_id)

    # ------------------------------------------------------------------ assignment and lifecycle

    def query_assignment(
        self, *, topic: str, group: str, client_id: str, strategy: str, message_model: str
    ) -> list[tuple[int, str]] | None:
        """[(queueId or -1, PULL|POP)] for the client, None while the group has no registered client."""
        if self.assigner is None:
            return None
        return self.assigner(topic, group, client_id, strategy, message_model)

    def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self.broker.groups.table.get(group)

    async def close(self) -> None:
        self.waiters.wake_all()
        await asyncio.sleep(0)
