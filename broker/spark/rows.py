"""The source's row layout: the Spark schema, and pull-response bodies decoded straight into Arrow.

reader.py (and so stream.py) calls `record_batch()` in executors on each pull-response body;
source.py declares `SCHEMA_DDL` as the source schema. Column meanings are in docs/spark.md.

Why not `broker.protocol.message.decode_records`: that one builds a MessageExt per record, with host
strings through `ipaddress`, and it cost about 3/4 of a read's CPU. Here the layout's reference parser
(broker.protocol.record_layout) locates each record's fields and they land directly in column lists.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Collection

import pyarrow as pa

from broker.protocol.message import SysFlag
from broker.protocol.properties import Prop, decode_properties
from broker.protocol.record_layout import parse_record

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
    pos, size = 0, len(body)
    while pos < size:
        r = parse_record(body, pos)
        total, qoff, sys_flag = r.total_size, r.queue_offset, r.sys_flag
        at = r.properties_at
        props = decode_properties(body[at : at + r.properties_len].decode())
        offset_id = ""
        if Prop.UNIQ_KEY not in props:  # offsetMsgId: store host address, port and CommitLog offset
            offset_id = (r.store_ip + _OFFSET_ID.pack(r.store_port, r.physical_offset)).hex().upper()
        pos += total
        if qoff >= end:
            continue
        tag = props.get(Prop.TAGS)
        if tags and tag not in tags:
            continue
        raw = body[r.body_at : r.body_at + r.body_len]
        if sys_flag & SysFlag.COMPRESSED:
            raw = zlib.decompress(raw)
        topics.append(body[r.topic_at : r.topic_at + r.topic_len].decode())
        queue_ids.append(r.queue_id)
        offsets.append(qoff)
        msg_ids.append(props.get(Prop.UNIQ_KEY) or offset_id)
        keys.append(props.get(Prop.KEYS))
        tag_col.append(tag)
        bodies.append(raw)
        props_col.append(list(props.items()))
        born.append(r.born_timestamp * 1000)
        stored.append(r.store_timestamp * 1000)
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
