"""NameServer request and response bodies: RegisterBrokerBody (both forms), route and cluster JSON.

The NameServer processors parse REGISTER_BROKER bodies with `parse_register_body` and answer routes
with `encode_topic_route` / `encode_cluster_info`; the broker (and tests) build its registration body
with `encode_register_body`. Layouts follow rocketmq-protocol.md section 6.
"""

from __future__ import annotations

import logging
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from broker.protocol.bodies import BodyError, DataVersion, TopicConfig
from broker.protocol.fastjson import dumps

__all__ = [
    "PERM_WRITE",
    "BodyError",
    "BrokerData",
    "DataVersion",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "encode_cluster_info",
    "encode_register_body",
    "encode_topic_route",
    "parse_register_body",
]

log = logging.getLogger(__name__)

_INT = struct.Struct(">i")
# MQVersion ordinals that change the body layout.
_V3_0_11 = 37
_V5_0_0 = 413
PERM_WRITE = 2


@dataclass(slots=True)
class RegisterBrokerBody:
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    filter_server_list: list[str] = field(default_factory=list)


def parse_register_body(body: bytes, *, compressed: bool, version: int) -> RegisterBrokerBody:
    """Decode a REGISTER_BROKER body; raises BodyError with the reason when it is malformed."""
    if not body:
        return RegisterBrokerBody()
    if compressed:
        return _parse_compressed(body, version)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"register body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BodyError("register body is not a JSON object")
    # Brokers older than V3_0_11 send the TopicConfigSerializeWrapper itself.
    wrapper = data if version < _V3_0_11 else data.get("topicConfigSerializeWrapper") or {}
    if not isinstance(wrapper, dict):
        raise BodyError("topicConfigSerializeWrapper is not an object")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise BodyError("topicConfigTable is not an object")
    filters = data.get("filterServerList") or []
    return RegisterBrokerBody(
        topic_configs={str(name): TopicConfig.from_json(value, str(name)) for name, value in table.items()},
        data_version=DataVersion.from_json(wrapper.get("dataVersion")),
        filter_server_list=[str(f) for f in filters] if isinstance(filters, list) else [],
    )


def _parse_compressed(body: bytes, version: int) -> RegisterBrokerBody:
    try:
        raw = zlib.decompress(body)
    except zlib.error as exc:
        raise BodyError(f"compressed register body does not inflate: {exc}") from None
    reader = _Reader(raw)
    try:
        data_version = DataVersion.from_json(orjson.loads(reader.chunk()))
        count = reader.int()
        if count < 0:
            raise BodyError(f"negative topic count {count}")
        topics: dict[str, TopicConfig] = {}
        for _ in range(count):
            config = TopicConfig.decode_line(reader.chunk().decode())
            topics[config.topic_name] = config
        filters_raw = orjson.loads(reader.chunk())
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"compressed register body holds bad JSON: {exc}") from None
    except UnicodeDecodeError:
        raise BodyError("compressed register body holds a topic config that is not UTF-8") from None
    # version >= V5_0_0 appends topic queue mapping infos (static topics), which we do not serve.
    if version >= _V5_0_0 and reader.remaining:
        log.debug("ignoring %d bytes of topic queue mapping data in a register body", reader.remaining)
    filters = [str(f) for f in filters_raw] if isinstance(filters_raw, list) else []
    return RegisterBrokerBody(topics, data_version, filters)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int(self) -> int:
        if self.remaining < 4:
            raise BodyError("compressed register body is truncated")
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def chunk(self) -> bytes:
        size = self.int()
        if size < 0 or size > self.remaining:
            raise BodyError(f"compressed register body chunk length {size} overruns the body")
        start = self.pos
        self.pos += size
        return self.data[start : self.pos]


def encode_register_body(body: RegisterBrokerBody, *, compressed: bool = False, version: int = 479) -> bytes:
    """The body a broker sends with REGISTER_BROKER (RegisterBrokerBody.encode)."""
    if not compressed:
        wrapper = {
            "dataVersion": body.data_version.to_json(),
            "topicConfigTable": {name: config.to_json() for name, config in body.topic_configs.items()},
        }
        return orjson.dumps({"filterServerList": body.filter_server_list, "topicConfigSerializeWrapper": wrapper})
    parts: list[bytes] = []

    def chunk(data: bytes) -> None:
        parts.append(_INT.pack(len(data)))
        parts.append(data)

    chunk(orjson.dumps(body.data_version.to_json()))
    parts.append(_INT.pack(len(body.topic_configs)))
    for config in body.topic_configs.values():
        chunk(config.encode_line().encode())
    chunk(orjson.dumps(body.filter_server_list))
    if version >= _V5_0_0:
        parts.append(_INT.pack(0))  # no topic queue mapping infos
    return zlib.compress(b"".join(parts), 9)


# ---------------------------------------------------------------------- route data


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        # Bean properties in fastjson's alphabetical order.
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_json(self, addrs: dict[int, str] | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "brokerAddrs": dict(sorted((self.broker_addrs if addrs is None else addrs).items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            data["zoneName"] = self.zone_name
        return data


def encode_topic_route(
    broker_datas: list[dict[str, Any]],
    queue_datas: list[QueueData],
    filter_server_table: dict[str, list[str]],
    *,
    standard_json: bool,
    order_topic_conf: str | None = None,
) -> bytes:
    """TopicRouteData JSON; `standard_json` quotes the brokerAddrs keys (clients >= V4_9_4)."""
    route: dict[str, Any] = {
        "brokerDatas": broker_datas,
        "filterServerTable": filter_server_table,
    }
    if order_topic_conf is not None:
        route["orderTopicConf"] = order_topic_conf
    route["queueDatas"] = [queue.to_json() for queue in queue_datas]
    return dumps(route, quote_int_keys=standard_json)


def encode_cluster_info(broker_addr_table: dict[str, BrokerData], cluster_addr_table: dict[str, set[str]]) -> bytes:
    """ClusterInfo JSON, always fastjson's plain form (unquoted brokerId keys)."""
    info = {
        "brokerAddrTable": {name: data.to_json() for name, data in broker_addr_table.items()},
        "clusterAddrTable": {cluster: sorted(names) for cluster, names in cluster_addr_table.items()},
    }
    return dumps(info, quote_int_keys=False)
