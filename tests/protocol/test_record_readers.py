"""Every reader of CommitLog records against the layout's reference parser, over the same random records.

broker.protocol.record_layout is the one source of the record layout. The readers that use its parser
(message.decode_record, the Spark rows) and the fast copies that keep their own parse for speed
(dispatch_request.parse_record, recovery.check_record, the index helper's IPv4 scan, the SQL92 filter's
record_properties) must all read the same fields. The records come from `build_record` below, written
field by field from shared/reference/rocketmq-protocol.md section 5.1 (not from the code under test):
IPv4 and IPv6 born/store hosts, both magic codes, empty and large properties, empty and large bodies,
laid back to back as in a CommitLog file or a pull body.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import record_layout as layout
from broker.protocol.javahash import tags_code
from broker.protocol.message import MessageExt, SysFlag, body_crc, decode_record, encode_record
from broker.protocol.properties import Prop, decode_properties, encode_properties
from broker.server.property_filter import record_properties
from broker.store.dispatch_request import parse_record as dispatch_parse
from broker.store.index_helper import Indexer
from broker.store.recovery import check_record

try:  # the Spark rows need pyarrow (the `spark` extra)
    from broker.spark.rows import record_batch
except ImportError:  # pragma: no cover - the dev extra alone
    record_batch = None

V1, V2 = layout.MESSAGE_MAGIC_CODE, layout.MESSAGE_MAGIC_CODE_V2
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(0, 2**63 - 1)
MILLIS = st.integers(0, 2**42)  # timestamps to the year 2109: Arrow's timestamps take them
# sender bits and transaction types (ROLLBACK records are not indexed); COMPRESSED is left out, as the
# random bodies are not zlib streams
SYS_FLAGS = st.sampled_from([0, SysFlag.MULTI_TAGS]).flatmap(
    lambda f: st.sampled_from([0x0, 0x4, 0x8, 0xC]).map(lambda t: f | t)
)
_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@dataclass
class Fields:
    """What a record holds, before it is written."""

    magic: int
    queue_id: int
    flag: int
    queue_offset: int
    sys_flag: int
    born_ts: int
    born: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]
    store_ts: int
    store: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]
    reconsume: int
    prepared: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def layout_sys_flag(self) -> int:
        """The sysFlag as written: the host bits say how big each host is."""
        flag = self.sys_flag
        if self.born[0].version == 6:
            flag |= layout.BORNHOST_V6
        if self.store[0].version == 6:
            flag |= layout.STOREHOST_V6
        return flag


def build_record(f: Fields, physical_offset: int) -> bytes:
    """The record's bytes, field by field from the reference document (an encoder independent of ours)."""
    topic = f.topic.encode()
    props = encode_properties(f.properties).encode()
    out = bytearray(4)  # TOTALSIZE, filled in at the end
    out += struct.pack(">iiii", f.magic, body_crc(f.body), f.queue_id, f.flag)
    out += struct.pack(">qqiq", f.queue_offset, physical_offset, f.layout_sys_flag, f.born_ts)
    out += f.born[0].packed + struct.pack(">i", f.born[1])
    out += struct.pack(">q", f.store_ts)
    out += f.store[0].packed + struct.pack(">i", f.store[1])
    out += struct.pack(">iqi", f.reconsume, f.prepared, len(f.body)) + f.body
    out += (bytes((len(topic),)) if f.magic == V1 else struct.pack(">H", len(topic))) + topic
    out += struct.pack(">H", len(props)) + props
    struct.pack_into(">i", out, 0, len(out))
    return bytes(out)


def _hosts() -> st.SearchStrategy[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    return st.tuples(st.ip_addresses(v=4) | st.ip_addresses(v=6), st.integers(0, 65535))


def _properties() -> st.SearchStrategy[dict[str, str]]:
    known = st.fixed_dictionaries(
        {},
        optional={
            Prop.TAGS: _TEXT,
            Prop.KEYS: st.lists(_TEXT.filter(lambda s: " " not in s), max_size=3).map(" ".join).filter(bool),
            Prop.UNIQ_KEY: _TEXT,
        },
    )
    others = st.dictionaries(_TEXT, _TEXT, max_size=4)
    # up to 30 000 bytes of one more property: near the int16 length field's limit
    large = st.integers(0, 30_000).map(lambda n: {"big": "v" * n} if n else {})
    return st.tuples(known, others, large).map(lambda t: {**t[1], **t[2], **t[0]})


def _bodies() -> st.SearchStrategy[bytes]:
    """Empty and small random bodies, or up to 256 KiB of a repeated pattern (cheap to generate)."""
    large = st.integers(0, 1 << 18).map(lambda n: bytes(i % 251 for i in range(n % 4096)) * (n // 4096 + 1))
    return st.binary(max_size=64) | large


@st.composite
def fields(draw: st.DrawFn) -> Fields:
    magic = draw(st.sampled_from([V1, V2]))
    # v1 has a 1-byte topic length; v2 carries any topic, short ones too (a reader must not assume long)
    topic = draw(st.text(min_size=1, max_size=60) if magic == V1 else st.text(min_size=1, max_size=300))
    if magic == V1 and len(topic.encode()) > 255:
        topic = topic[:50]
    return Fields(
        magic=magic,
        queue_id=draw(st.integers(0, 2**31 - 1)),
        flag=draw(INT32),
        queue_offset=draw(st.integers(0, 2**62)),  # below the Spark rows' `end`, which is exclusive
        sys_flag=draw(SYS_FLAGS),
        born_ts=draw(MILLIS),
        born=draw(_hosts()),
        store_ts=draw(MILLIS),
        store=draw(_hosts()),
        reconsume=draw(st.integers(0, 2**31 - 1)),
        prepared=draw(INT64),
        body=draw(_bodies()),
        topic=topic,
        properties=draw(_properties()),
    )


def _offset_msg_id(r: layout.Record) -> str:
    return (r.store_ip + struct.pack(">iq", r.store_port, r.physical_offset)).hex().upper()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(fields(), min_size=1, max_size=4))
def test_every_reader_reads_what_the_reference_parser_reads(records: list[Fields]) -> None:
    buf = bytearray()
    starts = []
    for f in records:
        starts.append(len(buf))
        buf += build_record(f, physical_offset=len(buf))
    data = bytes(buf)
    refs = []
    for f, pos in zip(records, starts, strict=True):
        # the reference parser reads back what was written, and the size formula agrees with it
        r = layout.parse_record(data, pos)
        refs.append(r)
        topic = data[r.topic_at : r.topic_at + r.topic_len].decode()
        props = decode_properties(data[r.properties_at : r.properties_at + r.properties_len].decode())
        body = data[r.body_at : r.body_at + r.body_len]
        assert (r.magic, r.queue_id, r.flag, r.queue_offset, r.physical_offset, r.sys_flag) == (
            f.magic, f.queue_id, f.flag, f.queue_offset, pos, f.layout_sys_flag,
        )  # fmt: skip
        assert (r.born_ip, r.born_port, r.store_ip, r.store_port) == (
            f.born[0].packed, f.born[1], f.store[0].packed, f.store[1],
        )  # fmt: skip
        assert (r.born_timestamp, r.store_timestamp, r.reconsume_times, r.prepared_transaction_offset) == (
            f.born_ts, f.store_ts, f.reconsume, f.prepared,
        )  # fmt: skip
        assert (body, topic, props, r.body_crc) == (f.body, f.topic, f.properties, body_crc(f.body))
        assert r.total_size == layout.total_size(r.body_len, r.topic_len, r.properties_len, r.sys_flag, r.magic)

        # broker.protocol.message: the clients' decoder, and the general encoder where it writes this layout
        msg = decode_record(data, pos, verify_crc=True)
        assert (msg.topic, msg.body, msg.properties, msg.store_size, msg.body_crc) == (
            topic, body, props, r.total_size, r.body_crc,
        )  # fmt: skip
        assert (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset, msg.sys_flag) == (
            r.queue_id, r.flag, r.queue_offset, r.physical_offset, r.sys_flag,
        )  # fmt: skip
        assert msg.born_host == (str(ipaddress.ip_address(r.born_ip)), r.born_port)
        assert msg.store_host == (str(ipaddress.ip_address(r.store_ip)), r.store_port)
        assert (msg.born_timestamp, msg.store_timestamp, msg.reconsume_times, msg.prepared_transaction_offset) == (
            r.born_timestamp, r.store_timestamp, r.reconsume_times, r.prepared_transaction_offset,
        )  # fmt: skip
        mapped = any(h[0].version == 6 and h[0].ipv4_mapped is not None for h in (f.born, f.store))
        if (f.magic == V2) == (len(f.topic.encode()) > 127) and not mapped:
            assert encode_record(msg) == data[pos : pos + r.total_size]

        # the store's dispatch parser (a fast copy), with and without the CRC check
        for check_crc in (False, True):
            size, req = dispatch_parse(data, pos, len(data), check_crc=check_crc)
            assert size == r.total_size and req is not None
            assert (req.topic, req.queue_id, req.commit_log_offset, req.msg_size) == (
                topic, r.queue_id, r.physical_offset, r.total_size,
            )  # fmt: skip
            assert (req.store_timestamp, req.consume_queue_offset, req.sys_flag) == (
                r.store_timestamp, r.queue_offset, r.sys_flag,
            )  # fmt: skip
            assert req.prepared_transaction_offset == r.prepared_transaction_offset
            assert (req.tags_code, req.keys, req.uniq_key) == (
                tags_code(props.get(Prop.TAGS)), props.get(Prop.KEYS), props.get(Prop.UNIQ_KEY),
            )  # fmt: skip

        # recovery's check
        assert check_record(data, pos, len(data), r.physical_offset, True) == (r.total_size, None, r.store_timestamp)

        # the SQL92 filter's properties
        assert record_properties(memoryview(data)[pos : pos + r.total_size]) == props

    # the index helper's scan (a fast copy for IPv4 hosts): the keys of every record but ROLLBACKs
    indexer = Indexer.__new__(Indexer)  # no files and no IndexService: only the per-record scan is read
    indexer._keys, indexer._phys, indexer._tss = [], [], []
    indexer._scanned_timestamp = 0
    assert indexer._scan(data, 0, 0, len(data)) == len(data)  # type: ignore[arg-type]
    expected: list[tuple[bytes, int, int]] = []
    for r in refs:
        props = decode_properties(data[r.properties_at : r.properties_at + r.properties_len].decode())
        if r.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_ROLLBACK_TYPE:
            continue
        prefix = data[r.topic_at : r.topic_at + r.topic_len] + b"#"
        keys = [props[Prop.UNIQ_KEY]] if props.get(Prop.UNIQ_KEY) else []
        keys += [k for k in props.get(Prop.KEYS, "").split(" ") if k]
        expected += [(prefix + k.encode(), r.physical_offset, r.store_timestamp) for k in keys]
    assert list(zip(indexer._keys, indexer._phys, indexer._tss, strict=True)) == expected

    # the Spark rows: one pull body of every record
    if record_batch is not None:
        batch = record_batch("b", data, 2**63 - 1)
        rows = batch.to_pylist()
        born_us, store_us = (batch.column(c).cast("int64").to_pylist() for c in ("born_timestamp", "store_timestamp"))
        micros = zip(born_us, store_us, strict=True)
        for row, r, (born, stored) in zip(rows, refs, micros, strict=True):
            props = decode_properties(data[r.properties_at : r.properties_at + r.properties_len].decode())
            assert row["topic"] == data[r.topic_at : r.topic_at + r.topic_len].decode()
            assert (row["queue_id"], row["queue_offset"]) == (r.queue_id, r.queue_offset)
            assert row["body"] == data[r.body_at : r.body_at + r.body_len]
            assert dict(row["properties"]) == props
            assert row["msg_id"] == (props.get(Prop.UNIQ_KEY) or _offset_msg_id(r))
            assert (row["keys"], row["tags"]) == (props.get(Prop.KEYS), props.get(Prop.TAGS))
            assert (born, stored) == (r.born_timestamp * 1000, r.store_timestamp * 1000)


def test_record_of_a_stored_message_has_the_documented_offsets() -> None:
    """The named offsets against the table in the reference document (IPv4 hosts, v1)."""
    fixed = (layout.QUEUE_OFFSET_AT, layout.PHYSICAL_OFFSET_AT, layout.SYS_FLAG_AT, layout.BORN_HOST_AT)
    assert fixed == (20, 28, 36, 48)
    assert (layout.store_timestamp_at(0), layout.store_host_at(0), layout.body_len_at(0)) == (56, 64, 84)
    assert layout.MIN_RECORD_SIZE == 91  # "TOTALSIZE = 91 + bodyLen + topicLen + propsLen"
    v6 = layout.BORNHOST_V6 | layout.STOREHOST_V6
    assert layout.body_at(v6) == 88 + 24 and layout.total_size(0, 0, 0, v6, V2) == 91 + 24 + 1
    raw = encode_record(MessageExt(topic="T", body=b"b", properties={"a": "1"}))
    assert layout.parse_record(raw).total_size == len(raw) == 91 + 1 + 1 + len("a\x011\x02")
