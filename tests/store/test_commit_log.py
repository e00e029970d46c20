"""CommitLog: the exact stored bytes, end-of-file blank records, rolling, batches and size limits."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest

from broker.protocol.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, decode_record, decode_records
from broker.store.commit_log import CommitLog
from broker.store.config import StoreConfig
from broker.store.results import MessageToStore, PutStatus
from tests.store.store_helpers import RecordingSink

FILE_SIZE = 4096


def make_log(tmp_path: Path, **kw: object) -> CommitLog:
    config = StoreConfig(store_path_root_dir=tmp_path, mapped_file_size_commit_log=FILE_SIZE, **kw)
    return CommitLog(config, ("10.0.0.7", 10911), RecordingSink())


def msg(body: bytes = b"hello", topic: str = "TopicA", queue_id: int = 3, **kw: object) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=5,
        properties=kw.pop("properties", {"TAGS": "tagA", "KEYS": "k1"}),  # type: ignore[arg-type]
        born_timestamp=1_700_000_000_123,
        born_host=("192.168.1.20", 50000),
        **kw,  # type: ignore[arg-type]
    )


async def _close(cl: CommitLog) -> None:
    await cl.allocator.close()
    cl.queue.close()


def test_golden_record_bytes(tmp_path: Path) -> None:
    async def main() -> tuple[bytes, int]:
        cl = make_log(tmp_path)
        await cl.put_message(msg(queue_id=1))  # queue offset 0
        r = await cl.put_message(msg(queue_id=1))  # queue offset 1, second record
        assert r.status is PutStatus.PUT_OK
        raw = bytes(cl.get_data(r.commit_log_offset, r.wrote_bytes))  # type: ignore[arg-type]
        await _close(cl)
        return raw, r.store_timestamp

    raw, store_ts = asyncio.run(main())
    # Java's messageProperties2String ends every pair with \x02, the last one included
    body, topic, props = b"hello", b"TopicA", b"TAGS\x01tagA\x02KEYS\x01k1\x02"
    first_size = 91 + len(body) + len(topic) + len(props)  # the first record, right before this one
    # the reference layout, field by field (rocketmq-protocol.md 5.1), built by hand
    expected = b"".join(
        [
            (91 + len(body) + len(topic) + len(props)).to_bytes(4, "big"),  # TOTALSIZE
            bytes.fromhex("DAA320A7"),  # MAGICCODE v1
            (zlib.crc32(body) & 0x7FFFFFFF).to_bytes(4, "big"),  # BODYCRC
            (1).to_bytes(4, "big"),  # QUEUEID
            (5).to_bytes(4, "big"),  # FLAG
            (1).to_bytes(8, "big"),  # QUEUEOFFSET
            first_size.to_bytes(8, "big"),  # PHYSICALOFFSET
            (0).to_bytes(4, "big"),  # SYSFLAG
            (1_700_000_000_123).to_bytes(8, "big"),  # BORNTIMESTAMP
            bytes([192, 168, 1, 20]) + (50000).to_bytes(4, "big"),  # BORNHOST
            store_ts.to_bytes(8, "big"),  # STORETIMESTAMP
            bytes([10, 0, 0, 7]) + (10911).to_bytes(4, "big"),  # STOREHOST
            (0).to_bytes(4, "big"),  # RECONSUMETIMES
            (0).to_bytes(8, "big"),  # PREPARED TRANSACTION OFFSET
            len(body).to_bytes(4, "big") + body,
            bytes([len(topic)]) + topic,
            len(props).to_bytes(2, "big") + props,
        ]
    )
    assert raw == expected
    m = decode_record(raw, verify_crc=True)
    assert (m.topic, m.body, m.queue_id, m.queue_offset, m.commit_log_offset) == ("TopicA", b"hello", 1, 1, first_size)
    assert m.properties == {"TAGS": "tagA", "KEYS": "k1"}
    assert m.born_host == ("192.168.1.20", 50000) and m.store_host == ("10.0.0.7", 10911)


def test_rolls_with_blank_record_and_queue_offsets_continue(tmp_path: Path) -> None:
    async def main() -> None:
        cl = make_log(tmp_path)
        results = [await cl.put_message(msg(body=bytes([i]) * 300)) for i in range(40)]
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert [r.queue_offset for r in results] == list(range(40))
        files = cl.queue.files
        assert len(files) >= 4
        assert sorted(p.name for p in (tmp_path / "commitlog").iterdir() if not p.name.endswith(".tmp"))[:2] == [
            "00000000000000000000",
            "00000000000000004096",
        ]
        # every file but the last ends with a blank record: int32 remaining + BLANK_MAGIC_CODE
        for mf in files[:-1]:
            pos = 0
            records = list(decode_records(bytes(mf.mm[:FILE_SIZE])[: _records_end(mf.mm)], verify_crc=True))
            pos = sum(r.store_size for r in records)
            remaining, magic = struct.unpack_from(">ii", mf.mm, pos)
            assert magic == BLANK_MAGIC_CODE and remaining == FILE_SIZE - pos
            assert pos + 300 + 91 + 6 + 20 + 8 > FILE_SIZE  # the next message really did not fit
        for i, r in enumerate(results):
            m = decode_record(cl.get_data(r.commit_log_offset, r.wrote_bytes), verify_crc=True)  # type: ignore[arg-type]
            assert m.body == bytes([i]) * 300 and m.commit_log_offset == r.commit_log_offset
        await _close(cl)

    asyncio.run(main())


def _records_end(mm: object) -> int:
    pos = 0
    while True:
        size, magic = struct.unpack_from(">ii", mm, pos)  # type: ignore[call-overload]
        if magic != MESSAGE_MAGIC_CODE:
            return pos
        pos += size


def test_batch_is_consecutive_and_in_one_file(tmp_path: Path) -> None:
    async def main() -> None:
        cl = make_log(tmp_path)
        await cl.put_message(msg(body=b"x" * 3000, queue_id=0))
        batch = [msg(body=f"m{i}".encode() * 50, queue_id=0) for i in range(5)]  # ~1.1 KiB: does not fit
        r = await cl.put_messages(batch)
        assert r.status is PutStatus.PUT_OK and r.message_count == 5
        assert r.commit_log_offset == FILE_SIZE  # rolled as a whole
        assert r.queue_offset == 1
        assert len(r.msg_ids) == 5 and r.msg_ids[0].startswith("0A000007")
        got = [decode_record(cl.get_data(o, -1)[: 91 + 100 + 6 + 20], verify_crc=True) for o in r.offsets]  # type: ignore[index]
        assert [g.queue_offset for g in got] == [1, 2, 3, 4, 5]
        mixed = await cl.put_messages([msg(queue_id=0), msg(queue_id=1)])
        assert mixed.status is PutStatus.MESSAGE_ILLEGAL
        await _close(cl)

    asyncio.run(main())


def test_size_limits(tmp_path: Path) -> None:
    async def main() -> None:
        cl = make_log(tmp_path, max_message_size=1000)
        assert (await cl.put_message(msg(body=b"x" * 1001))).status is PutStatus.MESSAGE_ILLEGAL
        assert (await cl.put_message(msg(topic="T" * 128))).status is PutStatus.MESSAGE_ILLEGAL
        big_props = {"KEYS": "k" * 40000}
        assert (await cl.put_message(msg(properties=big_props))).status is PutStatus.PROPERTIES_SIZE_EXCEEDED
        assert cl.max_offset == 0  # nothing was written by refused puts
        ok = await cl.put_message(msg(body=b"x" * 1000))
        assert ok.status is PutStatus.PUT_OK and ok.queue_offset == 0
        await _close(cl)

    asyncio.run(main())


def test_message_larger_than_a_file_is_illegal(tmp_path: Path) -> None:
    async def main() -> None:
        cl = make_log(tmp_path)
        r = await cl.put_message(msg(body=b"x" * FILE_SIZE))
        assert r.status is PutStatus.MESSAGE_ILLEGAL
        await _close(cl)

    asyncio.run(main())


@pytest.mark.parametrize("sys_flag", [0x4, 0xC])
def test_prepared_and_rollback_do_not_take_queue_offsets(tmp_path: Path, sys_flag: int) -> None:
    async def main() -> None:
        cl = make_log(tmp_path)
        half = await cl.put_message(msg(sys_flag=sys_flag))
        normal = await cl.put_message(msg())
        assert half.queue_offset == 0 and normal.queue_offset == 0
        assert decode_record(cl.get_data(half.commit_log_offset, half.wrote_bytes)).sys_flag == sys_flag  # type: ignore[arg-type]
        await _close(cl)

    asyncio.run(main())


def test_ipv6_born_host_uses_the_general_encoder(tmp_path: Path) -> None:
    async def main() -> None:
        cl = make_log(tmp_path)
        m = msg()
        m.born_host = ("2001:db8::1", 4000)
        r = await cl.put_message(m)
        assert r.status is PutStatus.PUT_OK
        got = decode_record(cl.get_data(r.commit_log_offset, r.wrote_bytes), verify_crc=True)  # type: ignore[arg-type]
        assert got.born_host == ("2001:db8::1", 4000) and got.commit_log_offset == r.commit_log_offset
        await _close(cl)

    asyncio.run(main())
