"""The source's own record decoder against the protocol's reference decoder (needs pyarrow, no Spark).

Stored records are built with broker.protocol.message.encode_record: IPv4 and IPv6 hosts, a
compressed body, a message without UNIQ_KEY (msg_id falls back to the offset id), and a long topic
(v2 magic). `record_batch` must give the same fields as `decode_record`, cut at `end`, and keep only
the listed tags. Its inline parse of IPv4/v1 records must refuse every malformed record the reference
parser refuses, with the same error (tests/protocol/test_record_readers.py holds the fields of random
valid records equal to the reference parser's).
"""

from __future__ import annotations

import struct
import zlib

import pytest

from broker.protocol import record_layout as layout
from broker.protocol.message import MessageDecodeError, MessageExt, SysFlag, decode_records, encode_record

pa = pytest.importorskip("pyarrow", reason="the spark extra is not installed (make test installs it)")
from broker.spark.rows import ARROW_SCHEMA, record_batch  # noqa: E402


def stored(i: int, **extra: object) -> MessageExt:
    props = {"TAGS": f"T{i % 2}", "KEYS": f"k{i} j{i}", "UNIQ_KEY": f"U{i:04d}", "p": "ü"}
    fields: dict = {
        "topic": "RowsT",
        "body": f"body-{i}".encode(),
        "properties": props,
        "queue_id": 3,
        "queue_offset": 100 + i,
        "commit_log_offset": 5000 + 200 * i,
        "born_timestamp": 1_700_000_000_000 + i,
        "store_timestamp": 1_700_000_000_500 + i,
        "store_host": ("10.0.0.7", 10911),
    }
    fields.update(extra)
    return MessageExt(**fields)


def records() -> list[MessageExt]:
    msgs = [stored(i) for i in range(4)]
    msgs.append(stored(4, born_host=("::1", 5), store_host=("2001:db8::2", 10911)))
    msgs.append(
        stored(5, body=zlib.compress(b"inflated " * 20), sys_flag=SysFlag.COMPRESSED | SysFlag.COMPRESSION_ZLIB)
    )
    msgs.append(stored(6, properties={"TAGS": "T0"}))  # no UNIQ_KEY, no KEYS
    msgs.append(stored(7, topic="L" * 200))  # v2 magic: 2-byte topic length
    return msgs


def test_record_batch_matches_the_reference_decoder() -> None:
    body = b"".join(encode_record(m) for m in records())
    batch = record_batch("broker-x", body, end=10_000)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    reference = list(decode_records(body))
    assert len(rows) == len(reference) == 8
    for row, ref in zip(rows, reference, strict=True):
        assert row["topic"] == ref.topic and row["broker"] == "broker-x"
        assert (row["queue_id"], row["queue_offset"]) == (ref.queue_id, ref.queue_offset)
        assert row["msg_id"] == ref.msg_id
        assert row["keys"] == ref.properties.get("KEYS") and row["tags"] == ref.tags
        assert row["body"] == ref.uncompressed_body()
        assert dict(row["properties"]) == ref.properties
        assert int(row["born_timestamp"].timestamp() * 1000) == ref.born_timestamp
        assert int(row["store_timestamp"].timestamp() * 1000) == ref.store_timestamp
    assert rows[5]["body"] == b"inflated " * 20
    assert rows[6]["msg_id"] == reference[6].offset_msg_id and rows[6]["keys"] is None


def test_record_batch_cuts_at_end_and_filters_tags_exactly() -> None:
    body = b"".join(encode_record(m) for m in records())
    assert [r["queue_offset"] for r in record_batch("b", body, end=103).to_pylist()] == [100, 101, 102]
    kept = record_batch("b", body, end=10_000, tags={"T1"}).to_pylist()
    assert [r["queue_offset"] for r in kept] == [101, 103, 105, 107]
    assert record_batch("b", b"", end=10).num_rows == 0


def test_a_truncated_body_is_an_error() -> None:
    body = encode_record(stored(0))
    with pytest.raises(MessageDecodeError):
        record_batch("b", body[:-3], end=10)


def _patched(record: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(record)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _malformed() -> list[tuple[str, bytes]]:
    good = encode_record(stored(0))
    r = layout.parse_record(good)
    body_len_at = r.body_at - 4
    return [
        ("TOTALSIZE past the body", _patched(good, 0, ">i", len(good) + 1)),
        ("TOTALSIZE one short", _patched(good, 0, ">i", len(good) - 1)),
        ("TOTALSIZE below the minimum", _patched(good, 0, ">i", 20)),
        ("unknown magic", _patched(good, 4, ">i", 0x12345678)),
        ("negative BODYLEN", _patched(good, body_len_at, ">i", -1)),
        ("BODYLEN past the record", _patched(good, body_len_at, ">i", len(good))),
        ("TOPICLEN past the record", _patched(good, r.topic_at - 1, ">B", 255)),
        ("PROPLEN one short", _patched(good, r.properties_at - 2, ">H", r.properties_len - 1)),
        ("PROPLEN past the record", _patched(good, r.properties_at - 2, ">H", r.properties_len + 1)),
        ("cut in the fixed fields", good[:60]),
        ("cut in the properties", good[:-3]),
    ]


@pytest.mark.parametrize(("what", "record"), _malformed(), ids=[w for w, _ in _malformed()])
def test_a_malformed_record_fails_as_the_reference_parser_fails(what: str, record: bytes) -> None:
    with pytest.raises(MessageDecodeError) as reference:
        layout.parse_record(record)
    with pytest.raises(MessageDecodeError) as ours:
        record_batch("b", record, end=10_000)
    assert str(ours.value) == str(reference.value), what
    # and in the middle of a pull body: after a good record, and before one
    good = encode_record(stored(1))
    for body in (good + record, record + good):
        with pytest.raises(MessageDecodeError):
            record_batch("b", body, end=10_000)
