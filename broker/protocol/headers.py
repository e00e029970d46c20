"""Typed request and response headers: the `extFields` of a RemotingCommand as frozen dataclasses.

Processors in broker.server and broker.namesrv call `XxxHeader.from_ext_fields(cmd.ext_fields)` to
read a request and `XxxHeader(...).to_ext_fields()` to build a response; clients do the reverse.
Each field keeps its wire name (and, for the send header, its SEND_MESSAGE_V2 short name) in the
field metadata. Because send and pull headers are parsed on every message, the parser and writer
of every class are generated once, as plain Python source, when the class is defined: no
reflection per call. Parsing follows Java's `decodeCommandCustomHeader` + `checkFields()`:
unknown keys (C++'s Signature/AccessKey/OnsChannel, 5.x's bname/ns/lo...) are ignored, a missing
required field raises `MissingHeaderField`, numbers must parse, booleans follow
`Boolean.parseBoolean` (plus the C++ clients' "1"/"0").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar, cast, dataclass_transform

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.errors import ProtocolError

__all__ = [
    "SEND_V2_CODES",
    "CheckTransactionStateRequestHeader",
    "ConsumeMessageDirectlyRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMinOffsetRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "Header",
    "HeaderFieldError",
    "InvalidHeaderField",
    "MissingHeaderField",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PutKVConfigRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryMessageRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "RegisterBrokerRequestHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "UnregisterBrokerRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "parse_send_request_header",
]

log = logging.getLogger(__name__)

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# Codes whose send header uses the single-letter SendMessageRequestHeaderV2 names
# (SendMessageRequestHeader.parseRequestHeader in Java).
# Plain ints: a membership test against IntEnum members is several times slower.
SEND_V2_CODES = frozenset(
    int(c) for c in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
)

# Boolean.parseBoolean is "equalsIgnoreCase(true)"; the C++ clients write "1"/"0" for bools, and
# reading their "1" as false (as Java would) would silently drop e.g. a batch flag they set.
_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False, "True": True, "False": False}
_SMALL_INTS = {str(i): i for i in range(-1, 257)}


class HeaderFieldError(ProtocolError):
    """A request header field is missing or unparsable. The frame itself was fine: answer with
    `response_code` and the message as remark; the connection stays open."""

    def __init__(self, header: str, wire_name: str, message: str) -> None:
        super().__init__(message)
        self.header = header
        self.wire_name = wire_name


class MissingHeaderField(HeaderFieldError):
    """A `@CFNotNull` field is absent (Java: "the custom field <name> is null")."""

    response_code = ResponseCode.SYSTEM_ERROR


class InvalidHeaderField(HeaderFieldError):
    """A field is present but is not a valid int/long or breaks a header-specific rule."""

    response_code = ResponseCode.SYSTEM_ERROR


def _missing(header: type, wire: str) -> MissingHeaderField:
    return MissingHeaderField(header.__name__, wire, f"the custom field <{wire}> is null")


def _bad_number(header: type, wire: str, value: object, kind: str) -> InvalidHeaderField:
    return InvalidHeaderField(header.__name__, wire, f"the custom field <{wire}> is not a valid {kind}: {value!r}")


def _parse_bool(value: str) -> bool:
    word = _BOOL_WORDS.get(value)
    return word if word is not None else value.lower() == "true"


# ---------------------------------------------------------------------------------------------
# Field declaration helpers. `kind` is the Java type: "str", "int" (int32), "long" (int64), "bool".


def req(wire: str, kind: str = "str", *, v2: str | None = None) -> Any:
    """A required (`@CFNotNull`) field."""
    return field(metadata={"wire": wire, "kind": kind, "required": True, "v2": v2})


def opt(wire: str, kind: str = "str", default: Any = None, *, v2: str | None = None) -> Any:
    """An optional field; absent on the wire means `default`."""
    return field(default=default, metadata={"wire": wire, "kind": kind, "required": False, "v2": v2})


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    wire: str
    kind: str
    required: bool
    default: Any


class Header:
    """Base of every header. Subclasses are declared with `@header` (frozen, slotted, kw-only)."""

    __slots__ = ()

    _SPECS: ClassVar[tuple[_Spec, ...]] = ()
    _PARSE: ClassVar[Callable[[Mapping[str, str]], Any]]
    _WRITE: ClassVar[Callable[[Any], dict[str, str]]]

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        """Parse extFields (strings, as command.py normalises them); raises HeaderFieldError."""
        result: Self = cls._PARSE(ext)
        return result

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields map: every value a string, None fields left out."""
        return type(self)._WRITE(self)

    def validate(self) -> None:
        """Java's checkFields() on a header built in Python: required fields set, values of the declared
        type and range, and the header's own rules (`_check`).

        Derived from the generated codec instead of restating the rules: the header goes to extFields and
        back (the parser raises for a missing field, a number out of range or a broken rule), and every
        field set must come back as it went in (a "1" in an int field comes back as 1: the wrong type).
        """
        cls = type(self)
        ext = self.to_ext_fields()
        parsed = cls.from_ext_fields(ext)
        for spec in cls._SPECS:
            value = getattr(self, spec.name)
            if value is None:
                continue  # an absent optional field (an absent required one failed to parse)
            back = getattr(parsed, spec.name)
            if not isinstance(ext[spec.wire], str) or type(back) is not type(value) or back != value:
                message = f"the custom field <{spec.wire}> is not a {spec.kind}"
                raise InvalidHeaderField(cls.__name__, spec.wire, message)

    def _check(self) -> None:
        """Header-specific rules beyond types, like a Java checkFields() override. None by default."""
        return None


_H = TypeVar("_H", bound=Header)


def _parser_source(specs: tuple[_Spec, ...], wires: list[str], check: bool) -> str:
    # Straight-line code: one dict lookup per field, int() only for numbers. Fields are stored on a
    # mutable twin class with the same slots, then the instance is switched to the frozen class:
    # a frozen dataclass would otherwise pay an object.__setattr__ call per field.
    lines = ["def parse(ext):", "    g = ext.get", "    o = new(Builder)"]
    for i, (spec, wire) in enumerate(zip(specs, wires, strict=True)):
        v = f"v{i}"
        lines.append(f"    {v} = g({wire!r})")
        convert: list[str] = []
        if spec.kind in ("int", "long"):
            # Most numeric fields are small ("0", "4", "-1"): a dict hit skips int() and the range check.
            low, high = (INT_MIN, INT_MAX) if spec.kind == "int" else (LONG_MIN, LONG_MAX)
            convert = [
                f"n = small({v})",
                "if n is not None:",
                f"    {v} = n",
                "else:",
                f"    try: {v} = int({v})",
                f"    except (ValueError, TypeError): raise bad(cls, {wire!r}, {v}, {spec.kind!r}) from None",
                f"    if not {low} <= {v} <= {high}: raise bad(cls, {wire!r}, {v}, {spec.kind!r})",
            ]
        elif spec.kind == "bool":
            convert = [f"n = words({v})", f"{v} = n if n is not None else parse_bool({v})"]
        if spec.required:
            lines.append(f"    if {v} is None: raise missing(cls, {wire!r})")
            lines += [f"    {line}" for line in convert]
        elif convert:
            lines += [f"    if {v} is None: {v} = d{i}", "    else:"]
            lines += [f"        {line}" for line in convert]
        else:
            lines.append(f"    if {v} is None: {v} = d{i}")
        lines.append(f"    o.{spec.name} = {v}")
    lines.append("    o.__class__ = cls")
    if check:
        lines.append("    o._check()")
    lines.append("    return o")
    return "\n".join(lines)


def _writer_source(specs: tuple[_Spec, ...], wires: list[str]) -> str:
    lines = ["def write(o):", "    d = {}"]
    for spec, wire in zip(specs, wires, strict=True):
        lines.append(f"    v = o.{spec.name}")
        if spec.kind == "str":
            lines.append(f"    if v is not None: d[{wire!r}] = v")
        elif spec.kind == "bool":
            lines.append(f"    if v is not None: d[{wire!r}] = 'true' if v else 'false'")
        else:
            lines.append(f"    if v is not None: d[{wire!r}] = str(v)")
    lines.append("    return d")
    return "\n".join(lines)


def _compile(name: str, source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    exec(compile(source, f"<header {name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def _build(cls: type[Header], specs: tuple[_Spec, ...], wires: list[str]) -> tuple[Callable[..., Any], ...]:
    # Same base and same __slots__ in the same order: CPython allows __class__ assignment between them.
    builder = type(f"_{cls.__name__}Builder", (Header,), {"__slots__": tuple(s.name for s in specs)})
    namespace: dict[str, Any] = {
        "cls": cls,
        "Builder": builder,
        "new": object.__new__,
        "missing": _missing,
        "bad": _bad_number,
        "parse_bool": _parse_bool,
        "words": _BOOL_WORDS.get,
        "small": _SMALL_INTS.get,
    }
    for i, spec in enumerate(specs):
        namespace[f"d{i}"] = spec.default
    check = cls._check is not Header._check
    parse = _compile("parse", _parser_source(specs, wires, check), namespace)
    write = _compile("write", _writer_source(specs, wires), dict(namespace))
    return parse, write


# Tells type checkers what `header` builds, so `SendMessageRequestHeader(topic=...)` is checked. `req` is the
# field specifier (no default: a required keyword); `opt(...)` is not one, so it reads as the field's default.
@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(req,))
def header(cls: type[_H]) -> type[_H]:
    """Class decorator: make `cls` a frozen slotted kw-only dataclass and generate its codec."""
    dc: type[_H] = dataclass(frozen=True, slots=True, kw_only=True)(cls)
    specs = tuple(
        _Spec(
            name=f.name,
            wire=f.metadata["wire"],
            kind=f.metadata["kind"],
            required=f.metadata["required"],
            default=None if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(cast(Any, dc))
    )
    dc._SPECS = specs
    dc._PARSE, dc._WRITE = _build(dc, specs, [s.wire for s in specs])
    return dc


# =============================================================================================
# Producer path


@header
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10, V1 long names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (310/320, `a`..`n`)."""

    _PARSE_V2: ClassVar[Callable[[Mapping[str, str]], Any]]
    _WRITE_V2: ClassVar[Callable[[Any], dict[str, str]]]

    producer_group: str = req("producerGroup", v2="a")
    topic: str = req("topic", v2="b")
    default_topic: str = req("defaultTopic", v2="c")
    default_topic_queue_nums: int = req("defaultTopicQueueNums", "int", v2="d")
    queue_id: int = req("queueId", "int", v2="e")
    sys_flag: int = req("sysFlag", "int", v2="f")
    born_timestamp: int = req("bornTimestamp", "long", v2="g")
    flag: int = req("flag", "int", v2="h")
    properties: str | None = opt("properties", v2="i")
    reconsume_times: int | None = opt("reconsumeTimes", "int", v2="j")
    unit_mode: bool = opt("unitMode", "bool", False, v2="k")
    max_reconsume_times: int | None = opt("maxReconsumeTimes", "int", v2="l")
    batch: bool = opt("batch", "bool", False, v2="m")
    broker_name: str | None = opt("bname", v2="n")

    @classmethod
    def from_v2_ext_fields(cls, ext: Mapping[str, str]) -> SendMessageRequestHeader:
        """Parse the single-letter SendMessageRequestHeaderV2 names."""
        result: SendMessageRequestHeader = cls._PARSE_V2(ext)
        return result

    def to_v2_ext_fields(self) -> dict[str, str]:
        return SendMessageRequestHeader._WRITE_V2(self)


def _add_v2(cls: type[SendMessageRequestHeader]) -> None:
    fields = {f.name: f for f in dataclasses.fields(cast(Any, cls))}
    short = [fields[s.name].metadata["v2"] for s in cls._SPECS]
    cls._PARSE_V2, cls._WRITE_V2 = _build(cls, cls._SPECS, short)


_add_v2(SendMessageRequestHeader)


def parse_send_request_header(code: int, ext: Mapping[str, str]) -> SendMessageRequestHeader:
    """The send header of a request with this code: V2 short names for 310/320/325, else V1."""
    if code in SEND_V2_CODES:
        return SendMessageRequestHeader._PARSE_V2(ext)  # type: ignore[no-any-return]
    return SendMessageRequestHeader._PARSE(ext)  # type: ignore[no-any-return]


@header
class SendMessageResponseHeader(Header):
    """Reply to 10/310/320; required whenever the code is 0, 10, 11 or 12. `msgId` is the offsetMsgId
    (comma-joined for a batch). MSG_REGION / TRACE_ON are what Java brokers add."""

    msg_id: str = req("msgId")
    queue_id: int = req("queueId", "int")
    queue_offset: int = req("queueOffset", "long")
    transaction_id: str | None = opt("transactionId")
    batch_uniq_id: str | None = opt("batchUniqId")
    recall_handle: str | None = opt("recallHandle")
    msg_region: str | None = opt("MSG_REGION")
    trace_on: str | None = opt("TRACE_ON")


@header
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37). commitOrRollback: 0 unknown, 8 commit, 12 rollback."""

    producer_group: str = req("producerGroup")
    tran_state_table_offset: int = req("tranStateTableOffset", "long")
    commit_log_offset: int = req("commitLogOffset", "long")
    commit_or_rollback: int = req("commitOrRollback", "int")
    from_transaction_check: bool = opt("fromTransactionCheck", "bool", False)
    msg_id: str = req("msgId")
    transaction_id: str | None = opt("transactionId")
    topic: str | None = opt("topic")

    def _check(self) -> None:
        if self.commit_or_rollback not in (0, 8, 12):
            raise InvalidHeaderField(
                type(self).__name__, "commitOrRollback", f"commitOrRollback field wrong: {self.commit_or_rollback}"
            )


@header
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer, one-way; body = the half message record."""

    tran_state_table_offset: int = req("tranStateTableOffset", "long")
    commit_log_offset: int = req("commitLogOffset", "long")
    msg_id: str | None = opt("msgId")
    transaction_id: str | None = opt("transactionId")
    offset_msg_id: str | None = opt("offsetMsgId")
    topic: str | None = opt("topic")
    broker_name: str | None = opt("bname")


@header
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35). Note the capital ID of `clientID`."""

    client_id: str = req("clientID")
    producer_group: str | None = opt("producerGroup")
    consumer_group: str | None = opt("consumerGroup")


# =============================================================================================
# Consumer path


@header
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361). sysFlag bits: 0x1 commit offset, 0x2 suspend,
    0x4 subscription, 0x8 class filter, 0x10 lite pull."""

    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    queue_offset: int = req("queueOffset", "long")
    max_msg_nums: int = req("maxMsgNums", "int")
    sys_flag: int = req("sysFlag", "int")
    commit_offset: int = req("commitOffset", "long")
    suspend_timeout_millis: int = req("suspendTimeoutMillis", "long")
    subscription: str | None = opt("subscription")
    sub_version: int = req("subVersion", "long")
    expression_type: str | None = opt("expressionType")
    max_msg_bytes: int | None = opt("maxMsgBytes", "int")
    request_source: int | None = opt("requestSource", "int")
    # Java's own misspelling; it is the wire name.
    proxy_forward_client_id: str | None = opt("proxyFrowardClientId")
    broker_name: str | None = opt("bname")


@header
class PullMessageResponseHeader(Header):
    """All four offset fields are required by Java's FastCodesHeader even on PULL_NOT_FOUND."""

    suggest_which_broker_id: int = req("suggestWhichBrokerId", "long")
    next_begin_offset: int = req("nextBeginOffset", "long")
    min_offset: int = req("minOffset", "long")
    max_offset: int = req("maxOffset", "long")
    offset_delta: int | None = opt("offsetDelta", "long")
    topic_sys_flag: int | None = opt("topicSysFlag", "int")
    group_sys_flag: int | None = opt("groupSysFlag", "int")
    forbidden_type: int | None = opt("forbiddenType", "int")


@header
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14). setZeroIfNotFound absent behaves as true (only explicit false gives 22)."""

    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    set_zero_if_not_found: bool | None = opt("setZeroIfNotFound", "bool")


@header
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15), usually one-way."""

    consumer_group: str = req("consumerGroup")
    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    commit_offset: int = req("commitOffset", "long")


@header
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30)."""

    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    committed: bool = opt("committed", "bool", True)


@header
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31)."""

    topic: str = req("topic")
    queue_id: int = req("queueId", "int")


@header
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). boundaryType is "LOWER" (default) or "UPPER"."""

    topic: str = req("topic")
    queue_id: int = req("queueId", "int")
    timestamp: int = req("timestamp", "long")
    boundary_type: str | None = opt("boundaryType")

    def _check(self) -> None:
        if self.boundary_type is not None and self.boundary_type.upper() not in ("LOWER", "UPPER"):
            raise InvalidHeaderField(type(self).__name__, "boundaryType", f"bad boundaryType {self.boundary_type!r}")


@header
class GetEarliestMsgStoretimeRequestHeader(Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str = req("topic")
    queue_id: int = req("queueId", "int")


@header
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): offset is the commit-log offset decoded from an offsetMsgId."""

    offset: int = req("offset", "long")
    topic: str | None = opt("topic")


@header
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12). `_UNIQUE_KEY_QUERY`="true" asks for a UNIQ_KEY lookup instead of KEYS."""

    topic: str = req("topic")
    key: str = req("key")
    max_num: int = req("maxNum", "int")
    begin_timestamp: int = req("beginTimestamp", "long")
    end_timestamp: int = req("endTimestamp", "long")
    unique_key_query: bool = opt("_UNIQUE_KEY_QUERY", "bool", False)


@header
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36): offset is the original's commit-log offset."""

    offset: int = req("offset", "long")
    group: str = req("group")
    delay_level: int = req("delayLevel", "int")
    origin_msg_id: str | None = opt("originMsgId")
    origin_topic: str | None = opt("originTopic")
    unit_mode: bool = opt("unitMode", "bool", False)
    max_reconsume_times: int | None = opt("maxReconsumeTimes", "int")


@header
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38); the reply body is a ConsumerIdList (bodies.py)."""

    consumer_group: str = req("consumerGroup")


@header
class NotifyConsumerIdsChangedRequestHeader(Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumers, one-way."""

    consumer_group: str = req("consumerGroup")


@header
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222, from mqadmin) and RESET_CONSUMER_CLIENT_OFFSET (220, to clients)."""

    topic: str = req("topic")
    group: str = req("group")
    timestamp: int = req("timestamp", "long")
    is_force: bool = req("isForce", "bool")
    queue_id: int = opt("queueId", "int", -1)
    offset: int | None = opt("offset", "long")


@header
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307), broker or admin to client."""

    consumer_group: str = req("consumerGroup")
    client_id: str = req("clientId")
    jstack_enable: bool | None = opt("jstackEnable", "bool")


@header
class GetConsumerStatusRequestHeader(Header):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str = req("topic")
    group: str = req("group")
    client_addr: str | None = opt("clientAddr")


@header
class ConsumeMessageDirectlyRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str = req("consumerGroup")
    client_id: str | None = opt("clientId")
    msg_id: str | None = opt("msgId")
    broker_name: str | None = opt("brokerName")
    topic: str | None = opt("topic")


# =============================================================================================
# Admin


@header
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str = req("topic")
    default_topic: str = req("defaultTopic")
    read_queue_nums: int = req("readQueueNums", "int")
    write_queue_nums: int = req("writeQueueNums", "int")
    perm: int = req("perm", "int")
    topic_filter_type: str = req("topicFilterType")
    topic_sys_flag: int | None = opt("topicSysFlag", "int")
    order: bool = req("order", "bool")
    attributes: str | None = opt("attributes")
    force: bool = opt("force", "bool", False)

    def _check(self) -> None:
        # Java runs TopicFilterType.valueOf() here, which throws for anything else.
        if self.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise InvalidHeaderField(
                type(self).__name__, "topicFilterType", f"bad topicFilterType {self.topic_filter_type!r}"
            )


@header
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215) and DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str = req("topic")


@header
class GetTopicStatsInfoRequestHeader(Header):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str = req("topic")


@header
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = req("consumerGroup")


@header
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS (208)."""

    consumer_group: str = req("consumerGroup")
    topic: str | None = opt("topic")
    topic_list: str | None = opt("topicList")


@header
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str = req("topic")


# =============================================================================================
# NameServer


@header
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105). Quote the brokerAddrs keys if version >= 401 or this is true."""

    topic: str = req("topic")
    accept_standard_json_only: bool | None = opt("acceptStandardJsonOnly", "bool")


@header
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103). bodyCrc32 = crc32(body) & 0x7FFFFFFF, 0 = unchecked."""

    broker_name: str = req("brokerName")
    broker_addr: str = req("brokerAddr")
    cluster_name: str = req("clusterName")
    ha_server_addr: str = req("haServerAddr")
    broker_id: int = req("brokerId", "long")
    heartbeat_timeout_millis: int | None = opt("heartbeatTimeoutMillis", "long")
    enable_acting_master: bool | None = opt("enableActingMaster", "bool")
    compressed: bool = opt("compressed", "bool", False)
    body_crc32: int = opt("bodyCrc32", "int", 0)
    zone_name: str | None = opt("__ZONE_NAME")


@header
class UnregisterBrokerRequestHeader(Header):
    """UNREGISTER_BROKER (104)."""

    broker_name: str = req("brokerName")
    broker_addr: str = req("brokerAddr")
    cluster_name: str = req("clusterName")
    broker_id: int = req("brokerId", "long")


@header
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322); body is the broker's DataVersion JSON."""

    broker_name: str = req("brokerName")
    broker_addr: str = req("brokerAddr")
    cluster_name: str = req("clusterName")
    broker_id: int = req("brokerId", "long")


@header
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str = req("brokerName")


@header
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = req("cluster")


@header
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str = req("namespace")
    key: str = req("key")
    value: str = req("value")


@header
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101); code 22 QUERY_NOT_FOUND when absent."""

    namespace: str = req("namespace")
    key: str = req("key")


@header
class DeleteKVConfigRequestHeader(Header):
    """DELETE_KV_CONFIG (102)."""

    namespace: str = req("namespace")
    key: str = req("key")


@header
class GetKVListByNamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str = req("namespace")
