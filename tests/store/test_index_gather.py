"""The index gathers reput passes into larger vectorized writes (IndexService.dispatch_batch): records wait
at most GATHER_S on a running loop, a query or the checkpoint's flush writes them first, records gathered
when the process dies are indexed again by recovery. Real files, a real event loop, a real store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from broker.protocol.message import decode_record
from broker.store import MessageStore, PutStatus, index_service
from broker.store.dispatch_request import DispatchRequest
from broker.store.index_service import GATHER_RECORDS, GATHER_S, IndexService
from tests.store.store_helpers import message, small_config

T0 = 1_700_000_000_000


def _requests(start: int, count: int) -> list[DispatchRequest]:
    return [
        DispatchRequest("T", 0, i * 100, 100, 0, T0 + i, i, f"key-{i}", f"UNIQ{i:08d}")
        for i in range(start, start + count)
    ]


def _service(directory: Path) -> IndexService:
    s = IndexService(directory, hash_slot_num=1000, index_num=20_000)
    s.load(True)
    return s


def _indexed(service: IndexService) -> int:
    return sum(f.index_count - 1 for f in service.files)  # entry 0 of a file is unused


def test_small_passes_wait_for_the_timer_on_a_loop(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path)
        service.dispatch_batch(_requests(0, 40))
        service.dispatch_batch(_requests(40, 40))
        assert _indexed(service) == 0  # gathered, not written yet
        await asyncio.sleep(GATHER_S * 3)
        assert _indexed(service) == 160  # UNIQ_KEY + one key each, in one write
        assert service.end_phy_offset == 79 * 100
        service.close()

    asyncio.run(run())


def test_a_full_gather_is_written_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path)
        service.dispatch_batch(_requests(0, GATHER_RECORDS - 1))
        assert _indexed(service) == 0
        service.dispatch_batch(_requests(GATHER_RECORDS - 1, 1))
        assert _indexed(service) == 2 * GATHER_RECORDS
        service.close()

    asyncio.run(run())


def test_a_query_and_a_direct_dispatch_write_the_gathered_records_first(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path)
        service.dispatch_batch(_requests(0, 50))
        assert service.query("T", "key-7", 4, 0, 2**62) == [700]  # written by the query, no waiting
        service.dispatch_batch(_requests(50, 50))
        service.dispatch(_requests(100, 1)[0])
        # in CommitLog order: the gathered ones were not skipped as "indexed before"
        assert service.query("T", "UNIQ00000060", 4, 0, 2**62) == [6000]
        assert service.query("T", "key-100", 4, 0, 2**62) == [10_000]
        service.close()

    asyncio.run(run())


def test_off_the_loop_passes_are_written_at_once(tmp_path: Path) -> None:
    service = _service(tmp_path)  # recovery dispatches from a worker thread: no loop, no timer
    service.dispatch_batch(_requests(0, 40))
    assert _indexed(service) == 80
    service.close()


def test_a_store_query_right_after_the_put_finds_the_message(tmp_path: Path) -> None:
    async def run() -> None:
        store = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await store.start()
        for i in range(40):
            assert (await store.put(message(i))).status is PutStatus.PUT_OK
        await asyncio.sleep(0)  # the reput pass, well inside the gathering window
        q = store.query_message("TopicTest", "key-39", 4, 0, 2**62)
        assert [decode_record(b).properties["UNIQ_KEY"] for b in q.buffers] == ["UNIQ00000039"]
        q.release()
        await store.shutdown()

    asyncio.run(run())


REPO = Path(__file__).resolve().parents[2]  # the child imports tests.store.store_helpers from here
_CRASH_CHILD = """
import asyncio, os, sys
from pathlib import Path
from tests.store.store_helpers import message, small_config
from broker.store import MessageStore, PutStatus, index_service

index_service.GATHER_S = 3600.0  # a slow disk must not let the timer write the gathered records

async def crash() -> None:
    store = MessageStore(small_config(Path(sys.argv[1])), ("127.0.0.1", 10911))
    await store.start()
    for i in range(30):
        assert (await store.put(message(i))).status is PutStatus.PUT_OK
    await asyncio.sleep(0)  # the reput pass
    store.index_service.write_pending()
    for i in range(30, 60):  # acknowledged and dispatched; their index entries only gathered
        assert (await store.put(message(i))).status is PutStatus.PUT_OK
    await asyncio.sleep(0)
    indexed = sum(f.index_count - 1 for f in store.index_service.files)
    assert indexed == 60, indexed  # the first 30 messages' two keys
    os._exit(0)  # the process dies without any cleanup, as after kill -9

asyncio.run(crash())
"""


def test_gathered_records_lost_in_a_crash_are_indexed_by_recovery(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", _CRASH_CHILD, str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr

    async def restart() -> None:
        store = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await store.start()
        assert store.recovery_report is not None and store.recovery_report.abnormal
        for i in (0, 29, 30, 59):
            q = store.query_message("TopicTest", f"key-{i}", 4, 0, 2**62)
            assert [decode_record(b).properties["UNIQ_KEY"] for b in q.buffers] == [f"UNIQ{i:08d}"]
            q.release()
        await store.shutdown()

    asyncio.run(restart())


def test_the_checkpoint_flush_writes_the_gathered_records_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_service, "GATHER_S", 3600.0)  # only the flush below may write them

    async def run() -> None:
        config = small_config(tmp_path, flush_interval_consume_queue=3_600_000)
        store = MessageStore(config, ("127.0.0.1", 10911))
        await store.start()
        for i in range(10):
            await store.put(message(i))
        await asyncio.sleep(0)
        assert store.index_service is not None and _indexed(store.index_service) == 0
        assert store.logics_flush is not None
        await store.logics_flush.flush_once()
        assert _indexed(store.index_service) == 20
        assert store.checkpoint is not None and store.checkpoint.index_msg_timestamp > 0
        await store.shutdown()

    asyncio.run(run())


def test_a_clean_shutdown_writes_the_gathered_records(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_service, "GATHER_S", 3600.0)

    async def run() -> None:
        store = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await store.start()
        for i in range(10):
            await store.put(message(i))
        await asyncio.sleep(0)
        assert store.index_service is not None and _indexed(store.index_service) == 0
        await store.shutdown()
        again = MessageStore(small_config(tmp_path), ("127.0.0.1", 10911))
        await again.start()
        assert again.recovery_report is not None and not again.recovery_report.abnormal
        assert again.index_service is not None and _indexed(again.index_service) == 20  # on disk, not re-dispatched
        await again.shutdown()

    asyncio.run(run())
