"""JSON request/response bodies with RocketMQ's shapes, and a fastjson-compatible JSON dialect.

The broker's client-manage processor parses `HeartbeatData.from_json(cmd.body)`; the lock, rebalance
and admin processors use the other bodies; our client builds them with `to_json()`. RocketMQ's
fastjson writes map keys that standard JSON forbids: unquoted integers (`{0:"addr"}`) and whole
JSON objects (`{{"brokerName":"b","queueId":0,"topic":"t"}:12}` in ConsumeStats and ResetOffsetBody).
`fastjson_dumps()` writes them and `fastjson_loads()` reads them back (standard JSON goes through
orjson first; only non-standard text takes the slower tolerant parser).

Clients differ (reference 8.3): C++ sends the heartbeat enums as integer ordinals and `subVersion`
as a string; ali-ons sends enum names and omits `expressionType`. Both are accepted here.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Self

import orjson

from broker.protocol import fastjson
from broker.protocol.codes import ResponseCode
from broker.protocol.errors import ProtocolError
from broker.protocol.fastjson import ObjectKey

__all__ = [
    "BodyError",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeType",
    "ConsumerData",
    "ConsumerIdList",
    "DataVersion",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "OffsetWrapper",
    "ProducerData",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionData",
    "TopicConfig",
    "TopicList",
    "UnlockBatchRequestBody",
    "fastjson_dumps",
    "fastjson_loads",
]


class BodyError(ProtocolError):
    """A request body is not valid JSON of the expected shape; answer SYSTEM_ERROR, keep the connection."""

    response_code = ResponseCode.SYSTEM_ERROR


# =============================================================================================
# fastjson dialect (broker.protocol.fastjson), with MessageQueue object keys and BodyError


def _object_key(value: dict[str, Any]) -> Hashable:
    """Object map keys that look like a MessageQueue become one; others an ObjectKey."""
    if set(value) == {"brokerName", "queueId", "topic"}:
        return MessageQueue.from_obj(value)
    return ObjectKey.of(value)


def fastjson_loads(data: bytes | str) -> Any:
    """Parse standard JSON or fastjson's dialect (unquoted int keys, object keys); BodyError when neither."""
    try:
        return fastjson.loads(data, _object_key)
    except fastjson.FastjsonError as exc:
        raise BodyError(str(exc)) from None


fastjson_dumps = fastjson.dumps


# =============================================================================================
# DataVersion


@dataclass(slots=True)
class DataVersion:
    """RocketMQ's DataVersion: bumped on every change of a broker's topics or groups, so the NameServer
    (REGISTER_BROKER, QUERY_DATA_VERSION) and slaves can skip what did not change. Also stored in the
    config files (topics.json, subscriptionGroup.json...)."""

    counter: int = 0
    state_version: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))

    def next_version(self, state_version: int | None = None) -> None:
        """Java's nextVersion: a new timestamp, counter + 1."""
        self.timestamp = int(time.time() * 1000)
        self.counter += 1
        if state_version is not None:
            self.state_version = state_version

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, data: Any) -> DataVersion:
        """Tolerant: a missing or malformed version reads as a fresh one, never as an error."""
        if not isinstance(data, dict):
            return cls()
        try:
            return cls(int(data.get("counter", 0)), int(data.get("stateVersion", 0)), int(data.get("timestamp", 0)))
        except (TypeError, ValueError):
            return cls()


# =============================================================================================
# TopicConfig

PERM_READ = 4
PERM_WRITE = 2


def _to_int(value: Any) -> int:
    if isinstance(value, bool | int):
        return int(value)
    try:
        return int(str(value))
    except ValueError:
        raise BodyError(f"expected an integer, got {value!r}") from None


@dataclass(slots=True)
class TopicConfig:
    """One topic's queues and permissions: a topics.json entry, a REGISTER_BROKER body entry."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Any, name: str | None = None) -> TopicConfig:
        """A topics.json / register-body entry; `name` is the table key, used when topicName is absent."""
        if not isinstance(value, dict):
            raise BodyError(f"topic config of {name!r} is not an object")
        if not (value.get("topicName") or name):
            raise BodyError("topic config has no topicName")
        attributes = value.get("attributes") or {}
        return cls(
            topic_name=str(value.get("topicName") or name),
            read_queue_nums=_to_int(value.get("readQueueNums", 16)),
            write_queue_nums=_to_int(value.get("writeQueueNums", 16)),
            perm=_to_int(value.get("perm", 6)),
            topic_filter_type=str(value.get("topicFilterType") or "SINGLE_TAG"),
            topic_sys_flag=_to_int(value.get("topicSysFlag", 0)),
            order=bool(value.get("order", False)),
            attributes={str(k): str(v) for k, v in attributes.items()} if isinstance(attributes, dict) else {},
        )

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    def encode_line(self) -> str:
        """TopicConfig.encode: the six space-separated fields of the compressed register body."""
        return " ".join(
            (
                self.topic_name,
                str(self.read_queue_nums),
                str(self.write_queue_nums),
                str(self.perm),
                self.topic_filter_type,
                orjson.dumps(self.attributes).decode(),
            )
        )

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        parts = line.split(" ", 5)
        if len(parts) < 5:
            raise BodyError(f"compressed topic config {line[:80]!r} has {len(parts)} fields, expected 5 or 6")
        attributes: dict[str, str] = {}
        if len(parts) == 6 and parts[5]:
            try:
                parsed = orjson.loads(parts[5])
            except orjson.JSONDecodeError:
                raise BodyError(f"attributes of topic {parts[0]!r} are not JSON") from None
            if isinstance(parsed, dict):
                attributes = {str(k): str(v) for k, v in parsed.items()}
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4], attributes=attributes)
        except ValueError:
            raise BodyError(f"compressed topic config {line[:80]!r} has a non-integer field") from None


# =============================================================================================
# Reading helpers


def _load_object(data: bytes | str, what: str) -> dict[str, Any]:
    obj = fastjson_loads(data)
    if not isinstance(obj, dict):
        raise BodyError(f"{what} body is not a JSON object")
    return obj


def _str(obj: dict[str, Any], key: str, what: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if value is None:
        raise BodyError(f"{what}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BodyError(f"{what}: {key!r} must be a string, got {value!r}")
    return str(value)


def _int(obj: dict[str, Any], key: str, what: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if value is None:
        raise BodyError(f"{what}: missing {key!r}")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise BodyError(f"{what}: {key!r} must be an integer, got {value!r}")


def _bool(obj: dict[str, Any], key: str, default: bool) -> bool:
    value = obj.get(key, default)
    if isinstance(value, str):
        return value.lower() in ("true", "1")
    return bool(value)


def _list(obj: dict[str, Any], key: str, what: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what}: {key!r} must be an array")
    return value


def _objects(obj: dict[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    items = _list(obj, key, what)
    for item in items:
        if not isinstance(item, dict):
            raise BodyError(f"{what}: {key!r} entries must be objects")
    return items


class _NamedEnum(IntEnum):
    """An enum that C++ sends as its ordinal and everyone else as its name."""

    @classmethod
    def parse(cls, value: Any, what: str) -> Self:
        try:
            if isinstance(value, str):
                return cls[value] if not value.lstrip("-").isdigit() else cls(int(value))
            if isinstance(value, int) and not isinstance(value, bool):
                return cls(value)
        except (KeyError, ValueError):
            pass
        raise BodyError(f"{what}: {value!r} is not a {cls.__name__}")


class ConsumeType(_NamedEnum):
    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(_NamedEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(_NamedEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


# =============================================================================================
# Bodies


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """topic + brokerName + queueId; hashable so it can key offset tables. JSON keys alphabetical."""

    topic: str
    broker_name: str
    queue_id: int

    @classmethod
    def from_obj(cls, obj: Any) -> MessageQueue:
        if not isinstance(obj, dict):
            raise BodyError(f"MessageQueue must be an object, got {obj!r}")
        return cls(
            topic=_str(obj, "topic", "MessageQueue"),
            broker_name=_str(obj, "brokerName", "MessageQueue"),
            queue_id=_int(obj, "queueId", "MessageQueue"),
        )

    def to_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> SubscriptionData:
        what = "SubscriptionData"
        codes: list[int] = []
        for code in _list(obj, "codeSet", what):
            try:
                codes.append(int(code))
            except (TypeError, ValueError):
                raise BodyError(f"{what}: codeSet entry {code!r} is not an integer") from None
        return cls(
            topic=_str(obj, "topic", what),
            sub_string=_str(obj, "subString", what, "*"),
            tags_set=tuple(str(tag) for tag in _list(obj, "tagsSet", what)),
            code_set=tuple(codes),
            sub_version=_int(obj, "subVersion", what, 0),
            expression_type=_str(obj, "expressionType", what, "TAG") or "TAG",
            class_filter_mode=_bool(obj, "classFilterMode", False),
        )

    def to_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> ConsumerData:
        what = "ConsumerData"
        return cls(
            group_name=_str(obj, "groupName", what),
            consume_type=ConsumeType.parse(obj.get("consumeType", 1), f"{what}.consumeType"),
            message_model=MessageModel.parse(obj.get("messageModel", 1), f"{what}.messageModel"),
            consume_from_where=ConsumeFromWhere.parse(obj.get("consumeFromWhere", 0), f"{what}.consumeFromWhere"),
            subscriptions=tuple(SubscriptionData.from_obj(s) for s in _objects(obj, "subscriptionDataSet", what)),
            unit_mode=_bool(obj, "unitMode", False),
        )

    def to_obj(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_obj() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass(frozen=True, slots=True)
class ProducerData:
    group_name: str

    def to_obj(self) -> dict[str, Any]:
        return {"groupName": self.group_name}


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """HEART_BEAT (34) body. The key is `clientID` with a capital ID."""

    client_id: str
    producers: tuple[ProducerData, ...] = ()
    consumers: tuple[ConsumerData, ...] = ()
    heartbeat_fingerprint: int | None = None
    without_sub: bool = False

    @classmethod
    def from_json(cls, data: bytes | str) -> HeartbeatData:
        obj = _load_object(data, "HeartbeatData")
        what = "HeartbeatData"
        fingerprint = obj.get("heartbeatFingerprint")
        return cls(
            client_id=_str(obj, "clientID", what),
            producers=tuple(ProducerData(_str(p, "groupName", what)) for p in _objects(obj, "producerDataSet", what)),
            consumers=tuple(ConsumerData.from_obj(c) for c in _objects(obj, "consumerDataSet", what)),
            heartbeat_fingerprint=None if fingerprint is None else _int(obj, "heartbeatFingerprint", what),
            without_sub=_bool(obj, "withoutSub", False),
        )

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_obj() for c in self.consumers],
            "producerDataSet": [p.to_obj() for p in self.producers],
        }
        if self.heartbeat_fingerprint is not None:
            obj["heartbeatFingerprint"] = self.heartbeat_fingerprint
            obj["withoutSub"] = self.without_sub
        return obj

    def to_json(self) -> bytes:
        return fastjson_dumps(self)


def _mq_set(obj: dict[str, Any], key: str, what: str) -> frozenset[MessageQueue]:
    return frozenset(MessageQueue.from_obj(mq) for mq in _list(obj, key, what))


def _mq_list(mqs: Iterable[MessageQueue]) -> list[dict[str, Any]]:
    return [mq.to_obj() for mq in sorted(mqs)]


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ (41) body."""

    consumer_group: str
    client_id: str
    mq_set: frozenset[MessageQueue] = field(default_factory=frozenset)
    only_this_broker: bool = False

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        what = cls.__name__
        obj = _load_object(data, what)
        return cls(
            consumer_group=_str(obj, "consumerGroup", what),
            client_id=_str(obj, "clientId", what),
            mq_set=_mq_set(obj, "mqSet", what),
            only_this_broker=_bool(obj, "onlyThisBroker", False),
        )

    def to_json(self) -> bytes:
        return fastjson_dumps(
            {
                "clientId": self.client_id,
                "consumerGroup": self.consumer_group,
                "mqSet": _mq_list(self.mq_set),
                "onlyThisBroker": self.only_this_broker,
            }
        )


@dataclass(frozen=True, slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ (42) body: the same shape as the lock request."""


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: frozenset[MessageQueue] = field(default_factory=frozenset)

    @classmethod
    def from_json(cls, data: bytes | str) -> LockBatchResponseBody:
        return cls(_mq_set(_load_object(data, "LockBatchResponseBody"), "lockOKMQSet", "LockBatchResponseBody"))

    def to_json(self) -> bytes:
        return fastjson_dumps({"lockOKMQSet": _mq_list(self.lock_ok_mq_set)})


@dataclass(frozen=True, slots=True)
class ConsumerIdList:
    """GET_CONSUMER_LIST_BY_GROUP (38) response body."""

    consumer_ids: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: bytes | str) -> ConsumerIdList:
        obj = _load_object(data, "ConsumerIdList")
        return cls(tuple(str(c) for c in _list(obj, "consumerIdList", "ConsumerIdList")))

    def to_json(self) -> bytes:
        return fastjson_dumps({"consumerIdList": list(self.consumer_ids)})


@dataclass(frozen=True, slots=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) / GET_TOPICS_BY_CLUSTER (224) response body."""

    topics: tuple[str, ...] = ()
    broker_addr: str | None = None

    @classmethod
    def from_json(cls, data: bytes | str) -> TopicList:
        obj = _load_object(data, "TopicList")
        addr = obj.get("brokerAddr")
        return cls(tuple(str(t) for t in _list(obj, "topicList", "TopicList")), None if addr is None else str(addr))

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {}
        if self.broker_addr is not None:
            obj["brokerAddr"] = self.broker_addr
        obj["topicList"] = list(self.topics)
        return fastjson_dumps(obj)


def _mq_table(obj: dict[str, Any], key: str, what: str) -> dict[MessageQueue, Any]:
    table = obj.get(key) or {}
    if not isinstance(table, dict):
        raise BodyError(f"{what}: {key!r} must be an object")
    result: dict[MessageQueue, Any] = {}
    for mq, value in table.items():
        if not isinstance(mq, MessageQueue):
            raise BodyError(f"{what}: {key!r} key {mq!r} is not a MessageQueue object")
        result[mq] = value
    return result


@dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """Body of 222's response and of 220: `{"offsetTable":{{mq}:offset}}` (object keys)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: bytes | str) -> ResetOffsetBody:
        table = _mq_table(_load_object(data, "ResetOffsetBody"), "offsetTable", "ResetOffsetBody")
        try:
            return cls({mq: int(offset) for mq, offset in table.items()})
        except (TypeError, ValueError):
            raise BodyError("ResetOffsetBody: offsets must be integers") from None

    def to_json(self) -> bytes:
        return fastjson_dumps({"offsetTable": dict(sorted(self.offset_table.items()))})


@dataclass(frozen=True, slots=True)
class ResetOffsetBodyForC:
    """The same content for C++ clients, which cannot parse object keys: a list of queue+offset."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: bytes | str) -> ResetOffsetBodyForC:
        what = "ResetOffsetBodyForC"
        items = _objects(_load_object(data, what), "offsetTable", what)
        return cls({MessageQueue.from_obj(item): _int(item, "offset", what) for item in items})

    def to_json(self) -> bytes:
        return fastjson_dumps(
            {"offsetTable": [{**mq.to_obj(), "offset": offset} for mq, offset in sorted(self.offset_table.items())]}
        )


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
            "pullOffset": self.pull_offset,
        }


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS (208) response body: `{"consumeTps":..,"offsetTable":{{mq}:{...}}}`."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @classmethod
    def from_json(cls, data: bytes | str) -> ConsumeStats:
        what = "ConsumeStats"
        obj = _load_object(data, what)
        table: dict[MessageQueue, OffsetWrapper] = {}
        for mq, wrapper in _mq_table(obj, "offsetTable", what).items():
            if not isinstance(wrapper, dict):
                raise BodyError(f"{what}: offsetTable values must be objects")
            table[mq] = OffsetWrapper(
                broker_offset=_int(wrapper, "brokerOffset", what, 0),
                consumer_offset=_int(wrapper, "consumerOffset", what, 0),
                pull_offset=_int(wrapper, "pullOffset", what, 0),
                last_timestamp=_int(wrapper, "lastTimestamp", what, 0),
            )
        tps = obj.get("consumeTps", 0.0)
        if isinstance(tps, bool) or not isinstance(tps, int | float):
            raise BodyError(f"{what}: consumeTps must be a number")
        return cls(table, float(tps))

    def to_json(self) -> bytes:
        return fastjson_dumps({"consumeTps": self.consume_tps, "offsetTable": dict(sorted(self.offset_table.items()))})
