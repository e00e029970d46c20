"""The source's row layout: the Spark schema, and pull-response bodies decoded straight into Arrow.

reader.py (and so stream.py) calls `record_batch()` in executors on each pull-response body;
source.py declares `SCHEMA_DDL` as the source schema. Column meanings are in docs/spark.md.

Why not `broker.protocol.message.decode_records`: that one builds a MessageExt per record, with host
strings through `ipaddress`, and it cost about 3/4 of a read's CPU. Here each record's fields land
directly in column lists. Records with two IPv4 hosts and the v1 magic code (every record this broker
writes for a topic name under 128 bytes) are located by one unpack of the fixed fields, inline; any
other record, and any record whose lengths do not add up, goes through the layout's reference parser
(broker.protocol.record_layout.parse_record), which also raises the error for a malformed one.
tests/spark/test_rows.py holds the two paths equal. The properties column is built from flat key and
value lists (`MapArray.from_arrays`): converting a list of per-row pair lists cost about 40% of the decode.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Collection

import pyarrow as pa

from broker.protocol.message import SysFlag
from broker.protocol.properties import Prop, decode_properties
from broker.protocol.record_layout import FIXED_SIZE_V4, FIXED_V4, HOSTS_V6, MESSAGE_MAGIC_CODE, parse_record

__all__ = ["ARROW_SCHEMA", "SCHEMA_DDL", "record_batch"]

SCHEMA_DDL = (
    "topic STRING, broker STRING, queue_id INT, queue_offset BIGINT, msg_id STRING, keys STRING, tags STRING, "
    "body BINARY, properties MAP<STRING, STRING>, born_timestamp TIMESTAMP, store_timestamp TIMESTAMP"
)

# Spark reads TIMESTAMP from Arrow as microseconds in UTC.
_TS = pa.timestamp("us", tz="UTC")
_PROPS = pa.map_(pa.string(), pa.string())

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("broker", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("msg_id", pa.string()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", _PROPS),
        ("born_timestamp", _TS),
        ("store_timestamp", _TS),
    ]
)

_OFFSET_ID = struct.Struct(">iq")
_U16 = struct.Struct(">H")
# TOPICLEN (1 byte with the v1 magic code) and PROPLEN (2 bytes) around the topic
_TOPIC_LEN_SIZE, _PROPS_LEN_SIZE = 1, 2
_COMPRESSED = SysFlag.COMPRESSED
_UNIQ_KEY, _TAGS, _KEYS = Prop.UNIQ_KEY, Prop.TAGS, Prop.KEYS


def record_batch(broker: str, body: bytes, end: int, tags: Collection[str] = ()) -> pa.RecordBatch:
    """The records of one pull body with queue offset < `end` and, when `tags` is not empty, a tag
    in `tags` (the exact re-check of the broker's hash filter). `keys` is the raw KEYS property
    (space-separated); `properties` holds every stored property; bodies are inflated."""
    topics: list[str] = []
    queue_ids: list[int] = []
    offsets: list[int] = []
    msg_ids: list[str] = []
    keys: list[str | None] = []
    tag_col: list[str | None] = []
    bodies: list[bytes] = []
    prop_names: list[str] = []
    prop_values: list[str] = []
    prop_ends: list[int] = [0]
    born: list[int] = []
    stored: list[int] = []
    topic_names: dict[bytes, str] = {}
    unpack = FIXED_V4.unpack_from
    pos, size = 0, len(body)
    while pos < size:
        fast = pos + FIXED_SIZE_V4 <= size
        if fast:
            (total, magic, _crc, queue_id, _flag, qoff, phy, sys_flag, born_ts, _born_ip, _born_port, store_ts,
             store_ip, store_port, _reconsume, _prepared, body_len) = unpack(body, pos)  # fmt: skip
            body_at = pos + FIXED_SIZE_V4
            topic_at = body_at + body_len + _TOPIC_LEN_SIZE
            record_end = pos + total
            fast = (
                magic == MESSAGE_MAGIC_CODE
                and not sys_flag & HOSTS_V6
                and body_len >= 0
                and record_end <= size
                and topic_at + _PROPS_LEN_SIZE <= record_end
            )
            if fast:
                topic_len = body[topic_at - _TOPIC_LEN_SIZE]
                props_at = topic_at + topic_len + _PROPS_LEN_SIZE
                fast = props_at <= record_end
                if fast:
                    (props_len,) = _U16.unpack_from(body, props_at - _PROPS_LEN_SIZE)
                    fast = props_at + props_len == record_end
        if not fast:  # IPv6 hosts, v2 magic, or a malformed record (parse_record then names the error)
            r = parse_record(body, pos)
            total, queue_id, qoff, phy = r.total_size, r.queue_id, r.queue_offset, r.physical_offset
            sys_flag = r.sys_flag
            born_ts, store_ts, store_ip, store_port = r.born_timestamp, r.store_timestamp, r.store_ip, r.store_port
            body_at, body_len, topic_at, topic_len = r.body_at, r.body_len, r.topic_at, r.topic_len
            props_at, props_len = r.properties_at, r.properties_len
        pos += total
        if qoff >= end:
            continue
        props = decode_properties(body[props_at : props_at + props_len].decode())
        tag = props.get(_TAGS)
        if tags and tag not in tags:
            continue
        raw = body[body_at : body_at + body_len]
        if sys_flag & _COMPRESSED:
            raw = zlib.decompress(raw)
        name = body[topic_at : topic_at + topic_len]
        topic = topic_names.get(name)
        if topic is None:
            topic = topic_names[name] = name.decode()
        topics.append(topic)
        queue_ids.append(queue_id)
        offsets.append(qoff)
        # msg_id: the producer's UNIQ_KEY, else the offsetMsgId (store host address, port, CommitLog offset)
        msg_ids.append(props.get(_UNIQ_KEY) or (store_ip + _OFFSET_ID.pack(store_port, phy)).hex().upper())
        keys.append(props.get(_KEYS))
        tag_col.append(tag)
        bodies.append(raw)
        prop_names.extend(props)
        prop_values.extend(props.values())
        prop_ends.append(len(prop_names))
        born.append(born_ts * 1000)
        stored.append(store_ts * 1000)
    properties = pa.MapArray.from_arrays(
        pa.array(prop_ends, pa.int32()), pa.array(prop_names, pa.string()), pa.array(prop_values, pa.string()), _PROPS
    )
    arrays = [
        pa.array(topics, pa.string()),
        pa.array([broker] * len(topics), pa.string()),
        pa.array(queue_ids, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(msg_ids, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(tag_col, pa.string()),
        pa.array(bodies, pa.binary()),
        properties,
        pa.array(born, _TS),
        pa.array(stored, _TS),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
