"""A running store cut back to an offset (a master deposed while it ran drops the tail no replica holds):
the CommitLog, the ConsumeQueues and the index forget the records past the cut, the next puts continue
there with the queue offsets the cut records had, and a restart finds the same store. Both index
writers: in process and the helper process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.protocol.message import decode_record, decode_records
from broker.store import GetStatus, MessageStore, PutStatus, StoreError
from tests.store.store_helpers import message, small_config


def _keys(store: MessageStore, queue_id: int, start: int, count: int) -> list[str]:
    got = store.get_message("g", "TopicTest", queue_id, start, count)
    if got.status is not GetStatus.FOUND:
        return []
    keys = [m.properties["KEYS"] for m in decode_records(b"".join(got.buffers), verify_crc=True)]
    got.release()
    return keys


def _query(store: MessageStore, key: str) -> list[str]:
    q = store.query_message("TopicTest", key, 10, 0, 2**62)
    found = [decode_record(b).properties["KEYS"] for b in q.buffers]
    q.release()
    return found


def _set_role(store: MessageStore, role: str) -> None:
    store.config.broker_role = role  # type: ignore[assignment]
    store._update_put_path()


@pytest.mark.parametrize("helper", [False, True], ids=["index-in-process", "index-helper"])
def test_a_running_store_cut_back_continues_from_the_cut(tmp_path: Path, helper: bool) -> None:
    async def run() -> None:
        config = small_config(tmp_path, index_helper_enable=helper)
        store = MessageStore(config, ("127.0.0.1", 10911))
        await store.start()
        cut = 0
        for i in range(600):  # several 64 KiB CommitLog files: the cut deletes whole files and shortens one
            r = await store.put(message(i, queue_id=i % 2))
            assert r.status is PutStatus.PUT_OK, r
            if i == 300:
                cut = r.commit_log_offset
        assert _query(store, "key-500") == ["key-500"]
        with pytest.raises(StoreError):
            await store.truncate_running(cut)  # it still takes puts

        _set_role(store, "SLAVE")
        dropped = await store.truncate_running(cut)
        assert dropped > 0 and store.max_phy_offset == cut
        assert store.get_max_offset_in_queue("TopicTest", 0) == 150
        assert store.get_max_offset_in_queue("TopicTest", 1) == 150
        assert _keys(store, 0, 148, 10) == ["key-296", "key-298"]
        assert _query(store, "key-500") == [] and _query(store, "key-299") == ["key-299"]
        assert await store.truncate_running(cut) == 0  # nothing past the end

        _set_role(store, "ASYNC_MASTER")  # what replication would bring continues at the cut just the same
        for i in range(1000, 1100):
            r = await store.put(message(i, queue_id=i % 2))
            assert r.status is PutStatus.PUT_OK, r
            if i == 1000:
                assert r.commit_log_offset == cut and r.queue_offset == 150
        await asyncio.sleep(0.05)  # the reput pass runs
        assert store.get_max_offset_in_queue("TopicTest", 0) == 200
        assert _keys(store, 0, 149, 3) == ["key-298", "key-1000", "key-1002"]
        assert _query(store, "key-1050") == ["key-1050"] and _query(store, "key-550") == []
        end = store.max_phy_offset
        await store.shutdown()

        again = MessageStore(small_config(tmp_path, index_helper_enable=helper), ("127.0.0.1", 10911))
        await again.start()
        try:
            assert again.max_phy_offset == end
            assert again.get_max_offset_in_queue("TopicTest", 0) == 200
            assert _keys(again, 1, 149, 3) == ["key-299", "key-1001", "key-1003"]
            assert _query(again, "key-1099") == ["key-1099"] and _query(again, "key-599") == []
        finally:
            await again.shutdown()

    asyncio.run(run())
