"""Pure translations between `apache.rocketmq.v2` messages and the broker's remoting messages and codes.

Send: a gRPC `Message` becomes the header fields and body of a SEND_MESSAGE request (`to_send_request`), after the
checks RocketMQ's proxy makes (`SendRefused` names the gRPC code). Receive: a stored `MessageExt` becomes a gRPC
`Message` with every field (`to_grpc_message`). `grpc_code` maps a remoting response code. Nothing here does I/O.
"""

from __future__ import annotations

import gzip
import hashlib
import ipaddress
import time
import zlib
from dataclasses import dataclass
from typing import Any

from broker.grpc.pb import definition
from broker.protocol.codes import ResponseCode
from broker.protocol.message import MessageExt, SysFlag
from broker.protocol.properties import Prop, encode_properties

__all__ = [
    "SYSTEM_PROPERTIES",
    "SendLimits",
    "SendRefused",
    "SendRequest",
    "grpc_code",
    "message_type_of",
    "peer_address",
    "timestamp_ms",
    "to_grpc_message",
    "to_send_request",
]

Code = definition.Code

TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
BORN_HOST = "__BORNHOST"
TRACE_CONTEXT = "TRACE_CONTEXT"

#: Property names the broker or RocketMQ's clients own (MessageConst's system set): a user property may not
#: use one, and a received message's `user_properties` holds every other name.
SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
        "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
        "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
        "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "__transactionId__", "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS", "__SHARDINGKEY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY", "__BORNHOST", "TRACE_CONTEXT", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
        "INNER_NUM", "INNER_BASE", "__STARTDELIVERTIME", "SCHEDULE_TOPIC_XXXX", "__RECALL_HANDLE",
    }
)  # fmt: skip

_CODES = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: Code.MESSAGE_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
    ResponseCode.NO_MESSAGE: Code.MESSAGE_NOT_FOUND,
    ResponseCode.FLOW_CONTROL: Code.TOO_MANY_REQUESTS,
    209: Code.TOO_MANY_REQUESTS,  # POLLING_FULL
    210: Code.MESSAGE_NOT_FOUND,  # POLLING_TIMEOUT
}


def grpc_code(remoting_code: int) -> int:
    """The gRPC `Code` of a remoting response code (INTERNAL_SERVER_ERROR for anything without its own)."""
    return int(_CODES.get(remoting_code, Code.INTERNAL_SERVER_ERROR))


class SendRefused(Exception):
    """A message the endpoint refuses before the broker sees it: `code` is the gRPC `Code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class SendLimits:
    """The proxy's send checks (RocketMQ's ProxyConfig names): body and property bounds, the furthest delivery."""

    max_body_size: int = 4 << 20
    max_user_property_size: int = 16 << 10
    max_user_property_num: int = 128
    max_message_group_size: int = 64
    max_delay_ms: int = 24 * 3600 * 1000


@dataclass(slots=True)
class SendRequest:
    """One message as a SEND_MESSAGE request: header fields, body, and the born host for the record."""

    ext_fields: dict[str, str]
    body: bytes
    born_host: tuple[str, int] | None
    message_id: str
    transactional: bool


def timestamp_ms(ts: Any) -> int:
    """A protobuf `Timestamp` in milliseconds."""
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def _set_timestamp(ts: Any, ms: int) -> None:
    ts.seconds, ts.nanos = divmod(ms, 1000)
    ts.nanos *= 1_000_000


def message_type_of(props: dict[str, str]) -> int:
    """The gRPC `MessageType` of stored properties: TRANSACTION > DELAY > FIFO > NORMAL (as the proxy reads it)."""
    if props.get(Prop.TRAN_MSG) == "true":
        return int(definition.MessageType.TRANSACTION)
    if Prop.DELAY in props or TIMER_DELIVER_MS in props or "TIMER_DELAY_SEC" in props:
        return int(definition.MessageType.DELAY)
    if Prop.SHARDING_KEY in props:
        return int(definition.MessageType.FIFO)
    return int(definition.MessageType.NORMAL)


def _check_tag(tag: str) -> None:
    if not tag.strip() or "|" in tag or any(ord(c) < 32 or ord(c) == 127 for c in tag):
        raise SendRefused(Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is blank or holds '|' or a control character")


def _born_host(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "0"
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
        return host, int(port) if port.isdigit() and int(port) < 65536 else 0
    return None


def peer_address(peer: str) -> tuple[str, int] | None:
    """The IP and port of a gRPC peer string (`ipv4:10.0.0.7:5000`, `ipv6:[::1]:5000`), None for others (`unix:`).

    A message's born host is this when the client sends none or a host name (the Java 5.x client sends its host name).
    """
    kind, _, rest = peer.partition(":")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        return None
    if kind == "ipv4":
        parts = host.split(".")
        if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
            return host, int(port)
        return None
    if kind == "ipv6" and host.startswith("[") and host.endswith("]"):
        try:
            address = ipaddress.ip_address(host[1:-1].split("%", 1)[0])
        except ValueError:
            return None
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return str(mapped or address), int(port)
    return None


def _body(msg: Any) -> bytes:
    body = bytes(msg.body)
    if msg.system_properties.body_encoding == definition.Encoding.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise SendRefused(Code.MESSAGE_CORRUPTED, f"GZIP body does not decompress: {exc}") from None
    return body


def to_send_request(msg: Any, now_ms: int | None = None, limits: SendLimits | None = None) -> SendRequest:
    """The SEND_MESSAGE request of one gRPC message, or SendRefused with the code RocketMQ's proxy answers."""
    lim = limits or SendLimits()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    sp = msg.system_properties
    topic = msg.topic.name
    message_id = sp.message_id
    if not message_id.strip():
        raise SendRefused(Code.ILLEGAL_MESSAGE_ID, "message id is blank")
    body = _body(msg)
    if not body:
        raise SendRefused(Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > lim.max_body_size:
        raise SendRefused(
            Code.MESSAGE_BODY_TOO_LARGE, f"message body of {len(body)} bytes exceeds the {lim.max_body_size} allowed"
        )
    props: dict[str, str] = {}
    size = 0
    if len(msg.user_properties) > lim.max_user_property_num:
        raise SendRefused(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"{len(msg.user_properties)} user properties exceed the {lim.max_user_property_num} allowed",
        )
    for key, value in msg.user_properties.items():
        if key in SYSTEM_PROPERTIES:
            raise SendRefused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {key!r} is reserved for the system")
        if not key or any(c in key for c in "\x01\x02") or any(c in value for c in "\x01\x02"):
            raise SendRefused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {key!r} is empty or holds \\x01/\\x02")
        size += len(key.encode()) + len(value.encode())
        props[key] = value
    if sp.HasField("tag"):
        _check_tag(sp.tag)
        props[Prop.TAGS] = sp.tag
        size += len(sp.tag.encode())
    keys = [k for k in sp.keys]
    for key in keys:
        if not key.strip() or " " in key or any(c in key for c in "\x01\x02"):
            raise SendRefused(Code.ILLEGAL_MESSAGE_KEY, f"key {key!r} is blank or holds a space or \\x01/\\x02")
    if keys:
        props[Prop.KEYS] = " ".join(keys)
        size += len(props[Prop.KEYS].encode())
    if size > lim.max_user_property_size:
        raise SendRefused(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"properties of {size} bytes exceed the {lim.max_user_property_size} allowed",
        )
    props[Prop.UNIQ_KEY] = message_id
    msg_type = sp.message_type
    sys_flag = 0
    transactional = msg_type == definition.MessageType.TRANSACTION
    if transactional:
        props[Prop.TRAN_MSG] = "true"
        sys_flag |= SysFlag.TRANSACTION_PREPARED_TYPE
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[Prop.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(int(sp.orphaned_transaction_recovery_duration.seconds))
    if sp.HasField("delivery_timestamp"):
        deliver = timestamp_ms(sp.delivery_timestamp)
        if deliver - now > lim.max_delay_ms:
            raise SendRefused(
                Code.ILLEGAL_DELIVERY_TIME, f"delivery time {deliver} is more than {lim.max_delay_ms} ms ahead"
            )
        if deliver > now:
            props[TIMER_DELIVER_MS] = str(deliver)
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group or len(group.encode()) >= lim.max_message_group_size or any(c in group for c in "\x01\x02"):
            raise SendRefused(
                Code.ILLEGAL_MESSAGE_GROUP, f"message group must be 1-{lim.max_message_group_size - 1} bytes"
            )
        props[Prop.SHARDING_KEY] = group
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = None
    if sp.born_host:
        props[BORN_HOST] = sp.born_host
        born_host = _born_host(sp.born_host)
    props[Prop.PGROUP] = topic  # the producer group of a gRPC producer is its topic (transaction checks)
    born_ms = timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else now
    ext = {
        "producerGroup": topic,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "-1",
        "sysFlag": str(sys_flag),
        "bornTimestamp": str(born_ms),
        "flag": "0",
        "properties": encode_properties(props),
        "reconsumeTimes": str(max(0, sp.delivery_attempt - 1)) if sp.HasField("delivery_attempt") else "0",
        "unitMode": "false",
        "batch": "false",
    }
    return SendRequest(ext, body, born_host, message_id, transactional)


def _host_text(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def to_grpc_message(msg: MessageExt, *, receipt_handle: str | None = None, delivery_attempt: int | None = None) -> Any:
    """The gRPC `Message` of a stored message: topic, tag, keys, id (UNIQ_KEY), every user property, hosts, times,
    queue and offset; the body uncompressed with its MD5 digest."""
    props = msg.properties
    out = definition.Message()
    out.topic.name = msg.topic
    for key, value in props.items():
        if key not in SYSTEM_PROPERTIES:
            out.user_properties[key] = value
    sp = out.system_properties
    if props.get(Prop.TAGS):
        sp.tag = props[Prop.TAGS]
    sp.keys.extend(msg.keys)
    sp.message_id = msg.msg_id
    body = msg.uncompressed_body()
    sp.body_digest.type = definition.DigestType.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = definition.Encoding.IDENTITY
    sp.message_type = message_type_of(props)
    _set_timestamp(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = props.get(BORN_HOST) or msg.born_host[0]
    _set_timestamp(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = _host_text(msg.store_host)
    if props.get(TIMER_DELIVER_MS, "").isdigit():
        _set_timestamp(sp.delivery_timestamp, int(props[TIMER_DELIVER_MS]))
    if props.get(Prop.SHARDING_KEY):
        sp.message_group = props[Prop.SHARDING_KEY]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = delivery_attempt if delivery_attempt is not None else msg.reconsume_times + 1
    if props.get(TRACE_CONTEXT):
        sp.trace_context = props[TRACE_CONTEXT]
    if props.get(Prop.DLQ_ORIGIN_TOPIC):
        sp.dead_letter_queue.topic = props[Prop.DLQ_ORIGIN_TOPIC]
        sp.dead_letter_queue.message_id = props.get(Prop.DLQ_ORIGIN_MESSAGE_ID, "")
    out.body = body
    return out
