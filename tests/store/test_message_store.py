"""MessageStore end to end on real files: put, get by queue offset, by key, by time, restart, HA API."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.protocol.message import decode_record, decode_records
from broker.store import GetStatus, MessageStore, PutStatus
from tests.store.store_helpers import message, small_config


def test_put_get_query_and_clean_restart(tmp_path: Path) -> None:
    async def first() -> list[int]:
        store = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await store.start()
        offsets = []
        for i in range(600):  # ~130 B records: several 64 KiB CommitLog files and 50-unit CQ files
            r = await store.put(message(i, queue_id=i % 2, tags="TagA" if i % 3 else "TagB"))
            assert r.status is PutStatus.PUT_OK, r
            assert r.queue_offset == i // 2
            offsets.append(r.commit_log_offset)
        await asyncio.sleep(0.05)  # reput runs
        assert store.get_max_offset_in_queue("TopicTest", 0) == 300
        got = store.get_message("g", "TopicTest", 0, 10, 5)
        assert got.status is GetStatus.FOUND and got.queue_offsets == [10, 11, 12, 13, 14]
        msgs = list(decode_records(b"".join(got.buffers), verify_crc=True))
        assert [m.properties["KEYS"] for m in msgs] == [f"key-{i}" for i in range(20, 30, 2)]
        got.release()
        # tag filter on the ConsumeQueue's hash code
        from broker.protocol.javahash import tags_code

        only_b = store.get_message("g", "TopicTest", 0, 0, 100, tags_filter={tags_code("TagB")})
        assert all(decode_record(b).tags == "TagB" for b in only_b.buffers) and only_b.message_count > 0
        only_b.release()
        q = store.query_message("TopicTest", "key-77", 10, 0, 2**62)
        assert [decode_record(b).properties["UNIQ_KEY"] for b in q.buffers] == ["UNIQ00000077"]
        q.release()
        assert store.get_message("g", "TopicTest", 0, 300, 5).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert store.get_message("g", "TopicTest", 0, 400, 5).status is GetStatus.OFFSET_OVERFLOW_BADLY
        assert store.get_message("g", "Nope", 0, 0, 5).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        m = store.look_message_by_offset(offsets[5])
        assert m is not None and m.properties["KEYS"] == "key-5"
        ts = m.store_timestamp
        assert store.get_offset_in_queue_by_time("TopicTest", 1, ts) <= 2
        await store.shutdown()
        assert not (tmp_path / "abort").exists()
        return offsets

    offsets = asyncio.run(first())

    async def second() -> None:
        store = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await store.start()
        assert store.recovery_report is not None and not store.recovery_report.abnormal
        assert store.get_max_offset_in_queue("TopicTest", 1) == 300
        r = await store.put(message(600, queue_id=1))
        assert r.queue_offset == 300 and r.commit_log_offset > offsets[-1]
        data = store.get_commit_log_data(0, 1000)
        assert data is not None and len(data) == 1000
        data.release()
        await store.shutdown()

    asyncio.run(second())


def test_sync_flush_and_batch(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, flush_disk_type="SYNC_FLUSH"))
        await store.start()
        results = await asyncio.gather(*(store.put(message(i)) for i in range(200)))
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert store.commit_log.queue.flushed_where >= max(r.commit_log_offset + r.wrote_bytes for r in results)
        assert store.flush_service is not None and store.flush_service.flush_count < 200  # grouped
        batch = await store.put([message(1000 + i, queue_id=3) for i in range(10)])
        assert batch.status is PutStatus.PUT_OK and batch.message_count == 10 and len(batch.msg_ids) == 10
        await asyncio.sleep(0.05)
        assert store.get_max_offset_in_queue("TopicTest", 3) == 10
        await store.shutdown()

    asyncio.run(main())


def test_slave_append_and_dispatch(tmp_path: Path) -> None:
    async def main() -> None:
        master = MessageStore(small_config(tmp_path / "m"))
        await master.start()
        for i in range(400):
            await master.put(message(i, queue_id=i % 4))
        slave = MessageStore(small_config(tmp_path / "s", broker_role="SLAVE"))
        await slave.start()
        assert (await slave.put(message(0))).status is PutStatus.SERVICE_NOT_AVAILABLE
        offset = 0
        while offset < master.max_phy_offset:
            data = master.get_commit_log_data(offset, 10_000)
            assert data is not None
            assert await slave.append_to_commit_log(offset, data)
            offset += len(data)
            data.release()
        assert not await slave.append_to_commit_log(offset + 5, b"xx")  # not at the end: refused
        await asyncio.sleep(0.05)
        for q in range(4):
            assert slave.get_max_offset_in_queue("TopicTest", q) == 100
        got = slave.get_message("g", "TopicTest", 2, 99, 1)
        assert decode_record(got.buffers[0]).properties["KEYS"] == "key-398"
        got.release()
        await slave.shutdown()
        await master.shutdown()

    asyncio.run(main())
