"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the producer path.

Registered by `BrokerController` on the remoting server. The entry point is synchronous: a send whose
put needs no wait (ASYNC_FLUSH) is answered inline, in the same socket write as the other replies of
that read, with no task or coroutine per message; only a put that must wait (group commit, replica,
a new CommitLog file) continues in a task. A request the connection held back (flow control) for
longer than `waitTimeMillsInSendQueue` gets SYSTEM_BUSY (producer flow control). Every
check happens before anything is stored: invalid topic, oversized body, malformed properties or batch
are answered with a remark saying why. Delay messages are rewritten to SCHEDULE_TOPIC_XXXX here, the
single path the architecture asks for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import time
import weakref
from typing import TYPE_CHECKING, NamedTuple

import orjson

from broker.metrics.message_types import TYPED_PROPERTIES, message_type
from broker.protocol.codes import CURRENT_VERSION, FLAG_RESPONSE, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand, frame
from broker.protocol.headers import SendMessageRequestHeader, parse_send_request_header
from broker.protocol.message import SENDER_SYS_FLAGS, SysFlag, sender_sys_flag
from broker.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop
from broker.protocol.reply import REPLY_TO_CLIENT
from broker.protocol.uniq_key import UniqKeyGenerator
from broker.server.batch_send import BatchSend, batch_messages
from broker.server.errors import RequestError
from broker.server.put_rules import (
    PUT_STATUS_CODES,
    checked_properties,
    rewrite_for_delay,
    stored_properties,
)
from broker.server.timer_message import may_be_timed, park_for_timer, timer_delivery
from broker.server.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TopicConfig,
    validate_topic,
)
from broker.server.transaction.messages import rewrite_to_half
from broker.store.results import PUT_OK, MessageToStore, PutResult

if TYPE_CHECKING:
    from broker.server.processors.context import SendContext
    from broker.transport.connection import RemotingConnection

__all__ = ["SendProcessor"]

log = logging.getLogger(__name__)

_STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)  # looked up per send: an int, not an Enum member
# Topics producers may not write to directly (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
_NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
    }
)
_MSG_REGION = "DefaultRegion"
# The JSON header of a stored send's reply, byte for byte what `encode(cmd.response(code, remark, ext))`
# writes (same keys in the same order; tests/server/test_send_reply.py holds them equal). Only code,
# remark, ids, offsets and opaque vary, so one %-format replaces a response command, its extFields dict
# and a generic header encode per message, a visible share of what a pipelined send costs the broker.
_STORED_REPLY = (
    b'{"code":%d,"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d","transactionId":%s,'
    b'"MSG_REGION":"'
    + _MSG_REGION.encode()
    + b'","TRACE_ON":"true"},"flag":'
    + str(FLAG_RESPONSE).encode()
    + b',"language":"JAVA","opaque":%d,%s"serializeTypeCurrentRPC":"JSON","version":'
    + str(CURRENT_VERSION).encode()
    + b"}"
)
# The commonest reply, one message stored with PUT_OK: code 0, no remark, and the offsetMsgId (the store
# host's hex, then the CommitLog offset as 16 hex digits) formatted in the same step.
_OK_REPLY = (
    _STORED_REPLY.replace(b'"code":%d', b'"code":0', 1)
    .replace(b'"msgId":"%s"', b'"msgId":"%s%016X"', 1)
    .replace(b'%s"serializeTypeCurrentRPC"', b'"serializeTypeCurrentRPC"', 1)
)


class _PendingPut(NamedTuple):
    """A put the store answers later, and what its response needs."""

    future: asyncio.Future[PutResult]
    queue_id: int
    uniq: str
    meter_key: tuple[str, str] | None  # a typed send's (topic, message type) for metrics, once stored


_SHARDING_KEY = Prop.SHARDING_KEY  # a module constant: one lookup less per send
# Any bit outside what senders set, and the COMMIT bit (COMMIT and ROLLBACK both have it): the slow path
_NOT_PLAIN_SYS_FLAGS = ~SENDER_SYS_FLAGS | SysFlag.TRANSACTION_COMMIT_TYPE


def _with_sender_sys_flag(header: SendMessageRequestHeader) -> SendMessageRequestHeader:
    """The header with the sysFlag a send may store (layout bits are the store's), or MESSAGE_ILLEGAL."""
    try:
        sys_flag = sender_sys_flag(header.sys_flag)
    except ValueError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
    return dataclasses.replace(header, sys_flag=sys_flag)


def _host_of(conn: RemotingConnection) -> tuple[str, int]:
    cached = conn.attributes.get("born_host")
    if cached is None:
        host, _, port = conn.peer.rpartition(":")
        host = host.strip("[]")
        if host.startswith("::ffff:"):
            host = host[7:]
        cached = conn.attributes["born_host"] = (host or "127.0.0.1", int(port) if port.isdigit() else 0)
    return cached


class SendProcessor:
    """Handles 10/310/320 (and the reply variants 324/325 as plain sends)."""

    def __init__(self, broker: SendContext) -> None:
        self.broker = broker
        self.config = broker.config
        self.store = broker.store
        self.topics = broker.topics
        self.uniq = UniqKeyGenerator(broker.config.broker_ip1 if _is_ipv4(broker.config.broker_ip1) else "127.0.0.1")
        self.wait_limit = broker.config.wait_time_mills_in_send_queue / 1000
        self.max_delay_level = len(broker.config.delay_levels_ms)
        self.in_flight: set[asyncio.Future[PutResult]] = set()  # puts waiting for the store
        #: client id -> the connection that sent its last request (processors/reply.py looks replies up here)
        self.requesters: weakref.WeakValueDictionary[str, RemotingConnection] = weakref.WeakValueDictionary()
        self._valid_topics: set[str] = set()  # names validate_topic accepted
        self._loop = asyncio.get_running_loop()
        self.meters = broker.meters  # None unless metricsExporterType=PROM
        self._cluster_name = broker.config.broker_cluster_name
        self._cluster_prop = f"{Prop.CLUSTER}{NAME_VALUE_SEPARATOR}{self._cluster_name}{PROPERTY_SEPARATOR}"

    # ------------------------------------------------------------------ entry

    def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | bytes | None:
        """Synchronous entry: the response now (a stored message's as an encoded frame), or None when the
        put must wait (a callback answers)."""
        received = cmd.received_at  # set only when the connection held the request back
        if received:
            waited = self._loop.time() - received
            if waited > self.wait_limit:
                return cmd.response(
                    ResponseCode.SYSTEM_BUSY,
                    f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
                    f"{int(waited * 1000)}ms, size of queue: {len(self.in_flight)}",
                )
        try:
            outcome = self.process(conn, cmd)
        except Exception as exc:
            return self._error_response(conn, cmd, exc)
        if not isinstance(outcome, _PendingPut):
            return outcome
        # the store answers later (group commit, replica, new file): a callback on its future, no task
        future = outcome.future
        self.in_flight.add(future)
        # the rpc latency of a late answer is measured here (the wrapper sees only None), from its read
        started = conn.read_ns if not cmd.received_at else 0
        future.add_done_callback(functools.partial(self._answer_later, conn, cmd, outcome, started))
        return None

    def _answer_later(
        self,
        conn: RemotingConnection,
        cmd: RemotingCommand,
        pending: _PendingPut,
        started: int,
        future: asyncio.Future[PutResult],
    ) -> None:
        self.in_flight.discard(future)
        if future.cancelled():  # shutdown gave up on it: the connection is going away
            return
        try:
            response = self._response(cmd, future.result(), pending.queue_id, pending.uniq, pending.meter_key)
        except Exception as exc:
            response = self._error_response(conn, cmd, exc)
        if self.meters is not None and started:
            self.meters.rpc.observe_late(cmd.code, response, started)
        if not cmd.is_oneway:
            conn.send_response(response)

    @staticmethod
    def _error_response(conn: RemotingConnection, cmd: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, RequestError):
            return cmd.response(exc.code, exc.remark)
        code = getattr(exc, "response_code", None)
        if isinstance(code, int):
            return cmd.response(code, str(exc))
        log.exception("send from %s failed", conn.peer)
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ the send

    def process(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | bytes | _PendingPut:
        """The response, or the pending put when the store must wait (see `_reply_to_put`)."""
        header = parse_send_request_header(cmd.code, cmd.ext_fields)
        if header.sys_flag & _NOT_PLAIN_SYS_FLAGS:  # rare: anything but compression, multi-tags or PREPARED
            header = _with_sender_sys_flag(header)
        tc = self._check(header, cmd)
        batch = cmd.code == _SEND_BATCH_MESSAGE or header.batch
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(tc.write_queue_nums)
        born_host = _host_of(conn)
        if batch:
            return self._send_batch(cmd, header, tc, queue_id, born_host)

        props_text = header.properties or ""
        if len(cmd.body) > self.config.max_message_size:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(cmd.body)} exceeds the maximum {self.config.max_message_size}",
            )
        props = checked_properties(props_text)  # one pass: the checks and every lookup below
        requester = props.get(REPLY_TO_CLIENT)
        if requester is not None:  # a request: its reply may come back before the client's first heartbeat
            self.requesters[requester] = conn
        tran_msg = props.get(Prop.TRAN_MSG)
        delayed = Prop.DELAY in props
        extra = self._cluster_prop
        uniq = props.get(Prop.UNIQ_KEY)
        generated = None  # the UNIQ_KEY the broker adds when the sender set none
        if not uniq:
            uniq = generated = self.uniq.next()
            extra += f"{Prop.UNIQ_KEY}{NAME_VALUE_SEPARATOR}{uniq}{PROPERTY_SEPARATOR}"
        if props_text and not props_text.endswith(PROPERTY_SEPARATOR):
            props_text += PROPERTY_SEPARATOR
        # positional: half the cost of keywords for this 12-field dataclass (0.35 vs 0.78 us)
        msg = MessageToStore(
            header.topic,  # topic
            queue_id,
            cmd.body,
            header.flag,
            {},  # properties: given as properties_bytes
            header.sys_flag,
            header.born_timestamp,
            born_host,
            header.reconsume_times or 0,
            0,  # prepared_transaction_offset
            (props_text + extra).encode(),  # properties_bytes
            (props.get(Prop.TAGS), props.get(Prop.KEYS), uniq),  # dispatch_keys
        )
        if tc.topic_filter_type == "MULTI_TAG":
            msg.sys_flag |= SysFlag.MULTI_TAGS
        to_dlq = False
        meters = self.meters
        retry = header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if retry:
            outcome = self._retry_or_dlq(header, msg, cmd.version)
            if outcome is None:
                return cmd.response(ResponseCode.SUCCESS)  # dropped: DLQ not writable (Java answers SUCCESS too)
            to_dlq = outcome
            if to_dlq and meters is not None:
                group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
                meters.dead_lettered(props.get(Prop.RETRY_TOPIC) or header.topic, group)
        half = tran_msg == "true" or msg.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED_TYPE
        if half and self.config.reject_transaction_message:
            raise RequestError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden",
            )
        # A rewrite stores the properties as a dict: the parsed ones plus the broker's, not a second parse.
        full: dict[str, str] | None = None
        if half and not to_dlq:
            # A transaction's half message waits in RMQ_SYS_TRANS_HALF_TOPIC (a delay applies at commit).
            msg.dispatch_keys = None  # its stored properties change
            rewrite_to_half(msg, stored_properties(props, self._cluster_name, generated), uniq)
        elif delayed and not to_dlq:
            full = stored_properties(props, self._cluster_name, generated)
            if rewrite_for_delay(msg, full, self.max_delay_level):  # leaves `full` as it was when it declines
                msg.dispatch_keys = None  # SCHEDULE_TOPIC_XXXX's tags code is the delivery time
        timed = may_be_timed(props_text)
        if not to_dlq and timed:
            if half:  # parked at the commit; refused now if it would be refused then
                self._timer_delivery(props)
            elif msg.topic == header.topic:
                deliver_ms = self._timer_delivery(props)
                if deliver_ms is not None:
                    if full is None:
                        full = stored_properties(props, self._cluster_name, generated)
                    park_for_timer(msg, full, deliver_ms)
        # WAIT=false: answer once stored, before the flush and the slave (Java's isWaitStoreMsgOK).
        wait = props.get(Prop.WAIT) != "false"
        # Like Java, the reply names the queue the producer chose, even when a delay rewrote the target.
        if meters is not None and (half or delayed or timed or retry or _SHARDING_KEY in props):
            # metrics count it at its answer, and read plain sends from the ConsumeQueues (broker_meters.py)
            put = self.store.append(msg, wait=wait, report=True)
            return self._reply_to_put(cmd, put, queue_id, uniq, (header.topic, message_type(props)))
        return self._reply_to_put(cmd, self.store.append(msg, wait=wait), queue_id, uniq, None)

    def _timer_delivery(self, props: dict[str, str]) -> int | None:
        c = self.config
        now = time.time_ns() // 1_000_000
        return timer_delivery(props, now, enabled=c.timer_wheel_enable, max_delay_sec=c.timer_max_delay_sec)

    def _send_batch(
        self,
        cmd: RemotingCommand,
        header: SendMessageRequestHeader,
        tc: TopicConfig,
        queue_id: int,
        born_host: tuple[str, int],
    ) -> RemotingCommand | bytes | _PendingPut:
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group " + header.topic
            )
        if len(cmd.body) > self.config.max_message_size:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the batch body size {len(cmd.body)} exceeds the maximum {self.config.max_message_size}; "
                "split the batch",
            )
        if header.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED_TYPE:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        batch_props = header.properties or ""
        try:
            batch_level_props = checked_properties(batch_props)
        except RequestError as exc:
            raise RequestError(exc.code, f"batch header: {exc.remark}") from None
        if batch_props and not batch_props.endswith(PROPERTY_SEPARATOR):  # as `process` does: CLUSTER stays its own
            batch_props += PROPERTY_SEPARATOR
        send = BatchSend(
            header.topic, queue_id, header.sys_flag, header.born_timestamp, born_host, self.config.max_message_size,
            batch_level_props, batch_props + self._cluster_prop,
        )  # fmt: skip
        messages, uniq_ids = batch_messages(cmd.body, send, self.uniq.next)
        wait = batch_level_props.get(Prop.WAIT) != "false"
        uniq = ",".join(uniq_ids)
        if self.meters is not None and not batch_level_props.keys().isdisjoint(TYPED_PROPERTIES):
            put = self.store.append(messages, wait=wait, report=True)  # counted as the typed single send above
            return self._reply_to_put(cmd, put, queue_id, uniq, (header.topic, message_type(batch_level_props)))
        return self._reply_to_put(cmd, self.store.append(messages, wait=wait), queue_id, uniq, None)

    def _reply_to_put(
        self,
        cmd: RemotingCommand,
        put: PutResult | asyncio.Future[PutResult],
        queue_id: int,
        uniq: str,
        meter_key: tuple[str, str] | None,
    ) -> RemotingCommand | bytes | _PendingPut:
        if isinstance(put, PutResult):
            return self._response(cmd, put, queue_id, uniq, meter_key)
        return _PendingPut(put, queue_id, uniq, meter_key)

    def _response(
        self,
        cmd: RemotingCommand,
        result: PutResult,
        queue_id: int,
        uniq: str,
        meter_key: tuple[str, str] | None = None,
    ) -> RemotingCommand | bytes:
        """A refusal as a command; a stored message's send result as its encoded frame (_STORED_REPLY)."""
        if result.status is PUT_OK and not result.offsets:
            self.broker.stats.put(1)
            if meter_key is not None:  # a typed send (plain sends are read from the ConsumeQueues)
                self.meters.count_typed(meter_key, 1, result.wrote_bytes)  # type: ignore[union-attr]
            header = _OK_REPLY % (
                result.store_host.encode(), result.commit_log_offset, queue_id, result.queue_offset,
                orjson.dumps(uniq), cmd.opaque,
            )  # fmt: skip
            return frame(header)
        code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if code not in _STORED_CODES:
            return cmd.response(code, f"store rejected the message: {result.status.name}")
        self.broker.stats.put(result.message_count or 1)
        if meter_key is not None:
            self.meters.count_typed(meter_key, result.message_count or 1, result.wrote_bytes)  # type: ignore[union-attr]
        remark = b"" if code == ResponseCode.SUCCESS else b'"remark":%s,' % orjson.dumps(result.status.name)
        header = _STORED_REPLY % (
            code, result.msg_id_text, queue_id, result.queue_offset, orjson.dumps(uniq), cmd.opaque,
            remark,
        )  # fmt: skip
        return frame(header)

    # ------------------------------------------------------------------ checks

    def check_topic(self, header: SendMessageRequestHeader, cmd: RemotingCommand) -> TopicConfig:
        """The checks of every send (role, permissions, topic name, auto-create, queue id): the topic's
        config, or a RequestError saying why not. The reply processor shares them."""
        return self._check(header, cmd)

    def _check(self, header: SendMessageRequestHeader, cmd: RemotingCommand) -> TopicConfig:
        c = self.config
        if not c.is_master:
            raise RequestError(
                ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker[{c.broker_ip1}] is a slave: sending is forbidden"
            )
        if not c.broker_permission & PERM_WRITE:
            raise RequestError(ResponseCode.NO_PERMISSION, f"the broker[{c.broker_ip1}] sending message is forbidden")
        if header.topic not in self._valid_topics:  # the name check (a regex) runs once per topic, not per send
            reason = validate_topic(header.topic)
            if reason is not None:
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL, reason)
            if len(self._valid_topics) < 100_000:
                self._valid_topics.add(header.topic)
        if header.topic in _NOT_ALLOWED_SEND_TOPICS:
            raise RequestError(ResponseCode.NO_PERMISSION, f"sending message to topic[{header.topic}] is forbidden")
        tc = self.topics.get(header.topic)
        if tc is None:
            if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = self.topics.create_in_send_back(header.topic, 1, PERM_READ | PERM_WRITE)
            else:
                tc = self.topics.create_in_send(header.topic, header.default_topic, header.default_topic_queue_nums)
            if tc is None:
                raise RequestError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{header.topic}] not exist, apply first please! (auto-create is "
                    f"{'on' if c.auto_create_topic_enable else 'off'})",
                )
        if not tc.writable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden")
        queues = max(tc.read_queue_nums, tc.write_queue_nums)
        if header.queue_id >= queues:
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"request queueId[{header.queue_id}] is illegal, topic {header.topic} has {queues} queues, "
                f"producer {cmd.ext_fields.get('a') or cmd.ext_fields.get('producerGroup')}",
            )
        return tc

    def _retry_or_dlq(self, header: SendMessageRequestHeader, msg: MessageToStore, version: int) -> bool | None:
        """A client re-sending to %RETRY%: past maxReconsumeTimes it goes to %DLQ% (True); None = drop."""
        group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        cfg = self.broker.groups.find(group)
        if cfg is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        max_times = cfg.retry_max_times
        if version >= 121 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        # A group still holding queue locks consumes orderly: its retries go straight to the DLQ (8.4).
        orderly = self.broker.locks.group_holds_locks(group)
        if (header.reconsume_times or 0) < max_times and not orderly:
            return False
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        tc = self.topics.create_in_send_back(dlq, 1, PERM_WRITE)
        if not tc.writable:
            log.warning("DLQ topic %s is not writable; dropping the message", dlq)
            return None
        log.info(
            "message to %s %s; moved to %s",
            header.topic,
            "from an orderly group" if orderly else f"exceeded {max_times} retries",
            dlq,
        )
        msg.topic = dlq
        msg.queue_id = 0
        return True


def _is_ipv4(ip: str) -> bool:
    parts = ip.split(".")
    return len(parts) == 4 and all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)
