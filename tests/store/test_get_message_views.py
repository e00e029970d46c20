"""`MessageStore.get_message` slices a queue's records out of one view per CommitLog file; held here to the
plain read, one ConsumeQueue unit and one `CommitLog.get_data` at a time, over records that cross files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.store import MessageStore, MessageToStore
from tests.store.store_helpers import dispatched, message, small_config

TOPIC = "Views"


def plain_read(
    store: MessageStore, queue_id: int, offset: int, max_nums: int, max_bytes: int
) -> tuple[list[bytes], int]:
    """Each record of the queue from `offset`, as get_message reads them with no filter: (records, next offset)."""
    cq = store.consume_queue_store.find(TOPIC, queue_id)
    assert cq is not None
    records: list[bytes] = []
    total = 0
    i = offset
    while i < cq.get_max_offset():
        unit = cq.get_index(i)
        assert unit is not None
        phy, size, _tags = unit
        i += 1
        if records and total + size > max_bytes:
            i -= 1
            break
        view = store.commit_log.get_data(phy, size)
        assert view is not None
        records.append(bytes(view))
        view.release()
        total += size
        if len(records) >= max_nums:
            break
    return records, i


def test_get_message_equals_the_plain_read_across_files(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, mapped_file_size_commit_log=16 * 1024))  # ~12 records a file
        await store.start()
        try:
            n = 0
            for _ in range(12):  # two queues, interleaved: batches to one, single sends to the other
                batch: list[MessageToStore] = []
                for j in range(5):
                    batch.append(message(n, topic=TOPIC, queue_id=0, size=200 + 97 * ((n + j) % 9)))
                    n += 1
                assert (await store.put(batch)).ok
                for _ in range(3):
                    assert (await store.put(message(n, topic=TOPIC, queue_id=1, size=100 + 61 * (n % 7)))).ok
                    n += 1
                await dispatched(store)
            assert len(store.commit_log.queue.files) >= 4
            for queue_id in (0, 1):
                for offset in range(0, store.get_max_offset_in_queue(TOPIC, queue_id), 3):
                    for max_nums, max_bytes in ((32, 256 * 1024), (4, 256 * 1024), (32, 2000), (1, 10)):
                        got = store.get_message("G", TOPIC, queue_id, offset, max_nums, max_total_bytes=max_bytes)
                        records = [bytes(b) for b in got.buffers]
                        assert (records, got.next_begin_offset) == plain_read(store, queue_id, offset, max_nums,
                                                                              max_bytes)  # fmt: skip
                        assert got.queue_offsets == list(range(offset, offset + len(records)))
                        got.release()
        finally:
            await store.shutdown()  # a view left behind would keep a file from closing: BufferError here

    asyncio.run(main())
