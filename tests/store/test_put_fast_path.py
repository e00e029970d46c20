"""The put fast path: the first CommitLog file exists after start, puts answer without a coroutine when
nothing must wait, and the requests the put path hands to dispatch equal what parsing the records gives."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.store import MessageStore, PutResult, PutStatus
from broker.store.dispatch_request import DispatchRequest
from tests.store.store_helpers import message, small_config
from tests.store_checks import assert_requests_match_records


def test_first_commit_log_file_is_created_at_start(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path))
        await store.start()
        try:
            assert len(store.commit_log.queue.files) == 1  # before any put
            put = store.append(message(0))
            assert isinstance(put, PutResult) and put.status is PutStatus.PUT_OK  # ASYNC_FLUSH: at once
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_sync_flush_answers_with_a_future(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, flush_disk_type="SYNC_FLUSH"))
        await store.start()
        try:
            put = store.append(message(0))
            assert isinstance(put, asyncio.Future)
            result = await put
            assert result.status is PutStatus.PUT_OK
            assert store.commit_log.queue.flushed_where >= result.commit_log_offset + result.wrote_bytes
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_sync_flush_put_that_does_not_wait_answers_at_once_and_is_flushed_soon(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path, flush_disk_type="SYNC_FLUSH"))
        await store.start()
        try:
            put = store.append(message(0), wait=False)  # a message with WAIT=false
            assert isinstance(put, PutResult) and put.status is PutStatus.PUT_OK
            end = put.commit_log_offset + put.wrote_bytes
            for _ in range(200):  # the group commit was woken, with nobody waiting on it
                if store.commit_log.queue.flushed_where >= end:
                    break
                await asyncio.sleep(0.01)
            assert store.commit_log.queue.flushed_where >= end
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_requests_handed_to_the_sink_equal_parsed_records(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path))
        await store.start()
        seen: list[DispatchRequest] = []

        class Recorder:
            def dispatch(self, request: DispatchRequest) -> None:
                seen.append(request)

        store.reput.add_dispatcher(Recorder())
        try:
            for i in range(300):  # several 64 KiB files: rolls, blank records, batches
                m = message(i, queue_id=i % 3, tags=f"T{i % 5}")
                if i % 7 == 0:
                    m.properties_bytes = f"TAGS\x01T{i}\x02KEYS\x01a b\x02UNIQ_KEY\x01U{i}\x02".encode()
                await store.put(m)
            await store.put([message(1000 + i, queue_id=1) for i in range(5)])
            await asyncio.sleep(0.05)
            assert store.dispatch_behind_bytes == 0
            assert len(seen) == 305
            assert_requests_match_records(store, seen)
        finally:
            await store.shutdown()

    asyncio.run(main())
