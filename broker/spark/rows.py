"""The source's row layout: the Spark schema, and pull-response bodies decoded straight into Arrow.

reader.py (and so stream.py) calls `record_batch()` in executors on each pull-response body;
source.py declares `SCHEMA_DDL` as the source schema. Column meanings are in docs/spark.md.

Why a decoder of our own instead of `broker.protocol.message.decode_records`: that one builds a
MessageExt per record, with host strings through `ipaddress`, and it cost about 3/4 of a read's CPU.
Here one struct unpack reads each record's fixed part and the fields land directly in column lists;
records with IPv6 hosts (rare) go through `decode_record`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Collection

import pyarrow as pa

from broker.protocol.message import (
    MESSAGE_MAGIC_CODE,
    RECORD_FIXED_SIZE_V4,
    RECORD_FIXED_V4,
    MessageDecodeError,
    SysFlag,
    decode_record,
)
from broker.protocol.properties import Prop, decode_properties

__all__ = ["ARROW_SCHEMA", "COLUMNS", "SCHEMA_DDL", "record_batch"]

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
COLUMNS = tuple(ARROW_SCHEMA.names)

# TOTALSIZE .. BODYLEN of a v1 record whose two hosts are IPv4 (see broker.protocol.message).
_U16 = struct.Struct(">H")
_OFFSET_ID = struct.Struct(">iq")
_V6_HOSTS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6


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
    props_col: list[list[tuple[str, str]]] = []
    born: list[int] = []
    stored: list[int] = []
    view = memoryview(body)
    pos, size = 0, len(body)
    while pos < size:
        if pos + RECORD_FIXED_SIZE_V4 > size:
            raise MessageDecodeError(f"record at {pos} is truncated: {size - pos} bytes left")
        (
            total, magic, _crc, qid, _flag, qoff, phy, sys_flag, born_ts,
            _born_ip, _born_port, store_ts, store_ip, store_port, _reconsume, _prepared, body_len,
        ) = RECORD_FIXED_V4.unpack_from(view, pos)  # fmt: skip
        if magic != MESSAGE_MAGIC_CODE or sys_flag & _V6_HOSTS:
            # IPv6 hosts or a v2 record: the general decoder knows those layouts.
            msg = decode_record(view, pos)
            total, qid, qoff, sys_flag = msg.store_size, msg.queue_id, msg.queue_offset, msg.sys_flag
            born_ts, store_ts, topic, raw, props = (
                msg.born_timestamp,
                msg.store_timestamp,
                msg.topic,
                msg.body,
                msg.properties,
            )
            offset_id = msg.offset_msg_id
        else:
            if total < RECORD_FIXED_SIZE_V4 or pos + total > size:
                raise MessageDecodeError(f"record at {pos} declares {total} bytes but {size - pos} are available")
            p = pos + RECORD_FIXED_SIZE_V4
            raw = body[p : p + body_len]
            p += body_len
            topic_len = body[p]
            topic = body[p + 1 : p + 1 + topic_len].decode()
            p += 1 + topic_len
            (props_len,) = _U16.unpack_from(view, p)
            props = decode_properties(body[p + 2 : p + 2 + props_len].decode())
            offset_id = ""
            if Prop.UNIQ_KEY not in props:
                offset_id = (store_ip + _OFFSET_ID.pack(store_port, phy)).hex().upper()
        pos += total
        if qoff >= end:
            continue
        tag = props.get(Prop.TAGS)
        if tags and tag not in tags:
            continue
        if sys_flag & SysFlag.COMPRESSED:
            raw = zlib.decompress(raw)
        topics.append(topic)
        queue_ids.append(qid)
        offsets.append(qoff)
        msg_ids.append(props.get(Prop.UNIQ_KEY) or offset_id)
        keys.append(props.get(Prop.KEYS))
        tag_col.append(tag)
        bodies.append(raw)
        props_col.append(list(props.items()))
        born.append(born_ts * 1000)
        stored.append(store_ts * 1000)
    arrays = [
        pa.array(topics, pa.string()),
        pa.array([broker] * len(topics), pa.string()),
        pa.array(queue_ids, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(msg_ids, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(tag_col, pa.string()),
        pa.array(bodies, pa.binary()),
        pa.array(props_col, _PROPS),
        pa.array(born, _TS),
        pa.array(stored, _TS),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
