"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): the consumer path.

Registered by `BrokerController`. Synchronous: the store lookup is an in-memory ConsumeQueue read,
and the body is the stored records joined as they are. SQL92 subscriptions (enablePropertyFilter)
are filtered here on each record's properties (property_filter.py); tags by hash in the store.
A pull that finds nothing and carries the SUSPEND flag is parked in the `PullHoldService` with no
response; the hold service calls `process(..., allow_suspend=False)` again when a message arrives
or the suspend time ends. Every reply carries suggestWhichBrokerId, nextBeginOffset, minOffset and
maxOffset (Java clients fail without them, even on PULL_NOT_FOUND).

Held pulls woken together (one arrival, hundreds of consumer groups at the same offset) pass one `memo`:
the first re-run reads the store and joins the records into one body, the others reuse that read, and
the connection writes the shared body without copying it (one copy per puller would cost hundreds of MiB
when hundreds of pulls of a large message wake together).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, overload

from broker.filter import SqlFilter
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import PullMessageRequestHeader
from broker.server.clients import parse_sub_string
from broker.server.errors import RequestError
from broker.server.hold import HeldPull
from broker.server.property_filter import compile_subscription, get_filtered
from broker.server.topics import PERM_READ
from broker.store.results import GetResult, GetStatus

if TYPE_CHECKING:
    from broker.server.processors.context import PullContext
    from broker.transport.connection import RemotingConnection

__all__ = ["PullProcessor", "ReadMemo", "StoredRead", "pull_response_code"]

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
# A long poll is answered before the clients' 30 s request timeout, whatever suspend time they ask.
MAX_SUSPEND_SECONDS = 25.0


class RecordViews(Sequence[memoryview]):
    """The records of a joined body as views into it, made only when asked for (HA's lag check)."""

    __slots__ = ("_body", "_bounds")

    def __init__(self, body: bytes, sizes: list[int]) -> None:
        self._body = body
        self._bounds = [0, *accumulate(sizes)]

    def __len__(self) -> int:
        return len(self._bounds) - 1

    @overload
    def __getitem__(self, index: int) -> memoryview: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[memoryview]: ...
    def __getitem__(self, index: int | slice) -> memoryview | Sequence[memoryview]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("record index out of range")
        return memoryview(self._body)[self._bounds[index] : self._bounds[index + 1]]


@dataclass(frozen=True, slots=True)
class StoredRead:
    """One store read with its records joined into one body, detached from the mapped files."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes
    records: RecordViews

    @classmethod
    def take(cls, got: GetResult) -> StoredRead:
        """Copy the records out of `got` once and release its views of the mapped files."""
        buffers = got.buffers
        if not buffers:
            body = b""
        elif len(buffers) == 1:
            body = buffers[0].tobytes()
        else:
            body = b"".join(buffers)
        records = RecordViews(body, [b.nbytes for b in buffers])
        got.release()
        return cls(got.status, got.next_begin_offset, got.min_offset, got.max_offset, body, records)


# Reads shared by the held pulls of one wake-up, keyed by what decides a read's result.
ReadMemo = dict[Hashable, StoredRead]


def pull_response_code(status: GetStatus, request_offset: int) -> int:
    """Store status -> response code (reference 8.1)."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL


class PullProcessor:
    def __init__(self, broker: PullContext) -> None:
        self.broker = broker  # the parts PullContext names, not the whole controller
        self.config = broker.config
        self.store = broker.store
        self._loop = asyncio.get_running_loop()

    def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        return self.process(conn, cmd, allow_suspend=True)

    def rerun(
        self, conn: RemotingConnection, cmd: RemotingCommand, memo: ReadMemo | None = None
    ) -> RemotingCommand | None:
        return self.process(conn, cmd, allow_suspend=False, memo=memo)

    def process(
        self, conn: RemotingConnection, cmd: RemotingCommand, *, allow_suspend: bool, memo: ReadMemo | None = None
    ) -> RemotingCommand | None:
        b = self.broker
        h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        if not self.config.broker_permission & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the broker[{self.config.broker_ip1}] pulling message is forbidden"
            )
        group_cfg = b.groups.find(h.consumer_group)
        if group_cfg is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{h.consumer_group}] does not exist"
            )
        if not group_cfg.consume_enable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
        tc = b.topics.get(h.topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not tc.readable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                f"consumer:[{conn.peer}]",
            )
        code_set, sql = self._subscription_filter(h)
        max_bytes = h.max_msg_bytes or self.config.max_transfer_bytes_on_message_in_memory
        read = self._read(h, code_set, sql, max_bytes, memo)
        code = pull_response_code(read.status, h.queue_offset)
        suggest, next_begin = 0, read.next_begin_offset
        if b.ha is not None:  # slave reads and suggestWhichBrokerId (broker/ha/reads.py)
            suggest, code, next_begin = b.ha.pull_suggestion.decide(
                code,
                found=read.records,
                commit_log_max_offset=self.store.max_phy_offset,
                group_broker_id=group_cfg.broker_id,
                group_slow_broker_id=group_cfg.which_broker_when_consume_slowly,
                master_alive=b.ha.master_alive,
                request_offset=h.queue_offset,
                next_begin_offset=next_begin,
            )
        ext = {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(read.min_offset),
            "maxOffset": str(read.max_offset),
        }
        body = b""
        if code == ResponseCode.SUCCESS:
            body = read.body
            b.stats.get(len(read.records))
            # always counted; the metrics' rocketmq_messages_out_total and in-flight gauges read it too
            b.get_stats.pulled(h.consumer_group, h.topic, h.queue_id, len(read.records), len(body), next_begin)
        if allow_suspend and h.sys_flag & FLAG_COMMIT_OFFSET and self.config.is_master:
            b.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and h.sys_flag & FLAG_SUSPEND:
            if self.config.long_polling_enable:
                wait = min(h.suspend_timeout_millis / 1000, MAX_SUSPEND_SECONDS)
            else:
                wait = self.config.short_polling_time_mills / 1000
            b.hold.suspend(
                HeldPull(
                    conn=conn,
                    cmd=cmd,
                    topic=h.topic,
                    queue_id=h.queue_id,
                    # a SQL92 scan may have read past non-matching messages: wait for what comes next
                    offset=read.next_begin_offset if sql is not None else h.queue_offset,
                    deadline=self._loop.time() + max(0.0, wait),
                    code_set=frozenset(code_set),
                )
            )
            return None
        remark = None if code == ResponseCode.SUCCESS else read.status.name
        return cmd.response(code, remark, ext, body)

    def _read(
        self,
        h: PullMessageRequestHeader,
        code_set: set[int],
        sql: SqlFilter | None,
        max_bytes: int,
        memo: ReadMemo | None,
    ) -> StoredRead:
        """The store's answer to this pull; with a memo, shared by every pull that asks the same thing."""
        if sql is not None:  # SQL92 filters are not shared: one subscription's filter object is not another's
            return StoredRead.take(
                get_filtered(
                    self.store, h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, max_bytes, sql
                )
            )
        key: Hashable = None
        if memo is not None:
            key = (h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, max_bytes, frozenset(code_set))
            shared = memo.get(key)
            if shared is not None:
                return shared
        read = StoredRead.take(
            self.store.get_message(
                h.consumer_group,
                h.topic,
                h.queue_id,
                h.queue_offset,
                h.max_msg_nums,
                max_total_bytes=max_bytes,
                tags_filter=set(code_set) if code_set else None,
            )
        )
        if memo is not None:
            memo[key] = read
        return read

    def _subscription_filter(self, h: PullMessageRequestHeader) -> tuple[set[int], SqlFilter | None]:
        """Tag hash codes to filter on (empty = everything) and the SQL92 filter, if any."""
        enabled = self.config.enable_property_filter
        if h.sys_flag & FLAG_SUBSCRIPTION:
            sql = compile_subscription(h.expression_type, h.subscription, enabled)
            if sql is not None:
                return set(), sql
            return parse_sub_string(h.subscription)[1], None
        sub = self.broker.consumers.find_subscription(h.consumer_group, h.topic)
        if sub is None:
            group = self.broker.consumers.get(h.consumer_group)
            if group is None:
                raise RequestError(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's group info not exist, group: {h.consumer_group}",
                )
            raise RequestError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist, topic: {h.topic}"
            )
        if sub.sub_version < h.sub_version:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest, group: {h.consumer_group} "
                f"{sub.sub_version} < {h.sub_version}",
            )
        sql = compile_subscription(sub.expression_type, sub.sub_string, enabled)
        if sql is not None:
            return set(), sql
        return set(sub.code_set), None
