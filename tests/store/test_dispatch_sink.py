"""The put -> dispatch path: every record of the CommitLog reaches dispatch exactly once, in CommitLog
order, and as the record itself says, on the hot path, at recovery after kill -9, and on a slave fed by
HA replication.

The CommitLog hands each record it writes to its sink (`DispatchSink.appended`); the store's sink, the
reput service, reads the records nobody handed over from the files. Each check compares what was seen
with a walk of the CommitLog files by the reference parse (CRC checked): the same records, the same
order, nothing twice and nothing missing. Real files, a real child process killed with SIGKILL, real HA
over loopback.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from broker.ha.master import HAMaster
from broker.ha.settings import HASettings
from broker.ha.slave import HAClient
from broker.protocol.properties import encode_properties
from broker.store import MessageStore, MessageToStore, PutStatus
from broker.store.commit_log import CommitLog
from broker.store.config import StoreConfig
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.dispatch import ReputService
from broker.store.dispatch_request import BLANK, DispatchRequest, parse_record
from broker.store.mapped_file_queue import MappedFileQueue
from tests.store.store_helpers import RecordingSink, dispatched, message, small_config

REPO = Path(__file__).resolve().parents[2]  # crash_child runs as `python -m tests.store.crash_child` from here
FILE_SIZE = 64 * 1024


class Recorder:
    """A per-record dispatcher that keeps every request it is given."""

    def __init__(self) -> None:
        self.seen: list[DispatchRequest] = []

    def dispatch(self, request: DispatchRequest) -> None:
        self.seen.append(request)


def records(files: MappedFileQueue, delay_levels: dict[int, int], start: int = 0) -> list[DispatchRequest]:
    """Every record from CommitLog offset `start` to the written end, parsed back (CRC checked)."""
    out: list[DispatchRequest] = []
    for mf in files.files:
        if mf.file_from_offset + mf.file_size <= start:
            continue
        pos = max(start - mf.file_from_offset, 0)
        while True:
            size, req = parse_record(mf.mm, pos, mf.wrote_position, check_crc=True, delay_levels=delay_levels)
            if req is None:
                assert size in (0, BLANK), f"unreadable record at {mf.file_from_offset + pos}"
                break
            out.append(req)
            pos += size
    return out


def assert_queues_hold(store: MessageStore, expected: list[DispatchRequest]) -> None:
    """Each record's ConsumeQueue unit points at it (the queues were built from the CommitLog)."""
    cqs = store.consume_queue_store
    for req in expected:
        cq = cqs.find(req.topic, req.queue_id)
        assert cq is not None, req
        assert cq.get_index(req.consume_queue_offset) == (req.commit_log_offset, req.msg_size, req.tags_code)


def varied(i: int) -> MessageToStore:
    """Messages of the shapes the put path meets: keys looked up by the send path or not, a delayed
    message (its tags code is the delivery time), an IPv6 producer."""
    m = message(i, queue_id=i % 3, size=200 + (i * 53) % 900, tags=f"T{i % 5}")
    if i % 4 == 0:
        props = {"TAGS": f"T{i % 5}", "KEYS": f"k{i} other", "UNIQ_KEY": f"U{i}"}
        m.properties_bytes = (encode_properties(props) + "\x02").encode()
        m.dispatch_keys = (f"T{i % 5}", f"k{i} other", f"U{i}")
    if i % 11 == 0:
        m.topic = "SCHEDULE_TOPIC_XXXX"
        m.properties = {"DELAY": "3", "REAL_TOPIC": "TopicTest", "REAL_QID": "0", "TAGS": "d"}
        m.properties_bytes = m.dispatch_keys = None  # as the send path hands a delayed message over
    if i % 13 == 0:
        m.born_host = ("::1", 40001)
    return m


def test_the_commit_log_hands_every_record_to_its_sink_once_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        config = StoreConfig(store_path_root_dir=tmp_path / "a", mapped_file_size_commit_log=FILE_SIZE)
        sink = RecordingSink()
        log = CommitLog(config, ("10.0.0.7", 10911), sink)
        replica_config = StoreConfig(store_path_root_dir=tmp_path / "b", mapped_file_size_commit_log=FILE_SIZE)
        replica_sink = RecordingSink()
        replica = CommitLog(replica_config, ("10.0.0.8", 10911), replica_sink)
        try:
            for i in range(200):  # several files: rolls and blank records
                assert (await log.put_message(varied(i))).status is PutStatus.PUT_OK
                if i % 50 == 0:
                    batch = [message(1000 + i + j, queue_id=1) for j in range(4)]
                    assert (await log.put_messages(batch)).status is PutStatus.PUT_OK
            assert len(log.queue.files) >= 3
            assert sink.requests == records(log.queue, config.delay_levels())
            assert len(sink.requests) == 200 + 4 * 4 and not sink.written_to
            # replicated bytes: no record is handed over, the sink hears where they end and reads them
            offset = 0
            while offset < log.max_offset:
                view = log.get_data(offset)
                assert view is not None
                chunk = bytes(view[:7000])
                view.release()
                assert await replica.append_data(offset, chunk)
                offset += len(chunk)
            assert not replica_sink.requests
            assert replica_sink.written_to[-1] == replica.max_offset == log.max_offset
            assert records(replica.queue, config.delay_levels()) == sink.requests
        finally:
            for c in (log, replica):
                await c.allocator.close()
                c.queue.close()

    asyncio.run(main())


def test_hot_path_dispatch_sees_every_record_once_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        store = MessageStore(small_config(tmp_path))
        recorder = Recorder()
        store.reput.add_dispatcher(recorder)  # before start(): configuration order does not matter
        await store.start()
        try:
            for i in range(300):
                assert (await store.put(varied(i))).status is PutStatus.PUT_OK
                if i % 60 == 0:
                    await store.put([message(1000 + i + j, queue_id=2) for j in range(3)])
                if i % 3 == 0:
                    await asyncio.sleep(0)  # a pass now and then, as between a broker's reads
            await dispatched(store)
            expected = records(store.commit_log.queue, store.config.delay_levels())
            assert len(expected) == 300 + 5 * 3
            assert recorder.seen == expected
            assert_queues_hold(store, expected)
        finally:
            await store.shutdown()

    asyncio.run(main())


def _write_and_get_killed(root: Path) -> None:
    """crash_child.py writes with SYNC_FLUSH from 24 writers until it is killed with SIGKILL."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_child", str(root), "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    for _ in range(400):  # acknowledged puts, so several files are written
        assert proc.stdout.readline().startswith(b"ack ")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()


def _recover_and_check(root: Path, *, rebuilt: bool) -> None:
    async def main() -> None:
        store = MessageStore(small_config(root))
        recorder = Recorder()
        store.reput.add_dispatcher(recorder)
        await store.start()
        try:
            report = store.recovery_report
            assert report is not None and report.abnormal
            levels = store.config.delay_levels()
            everything = records(store.commit_log.queue, levels)
            assert everything
            last_end = everything[-1].commit_log_offset + everything[-1].msg_size
            # the log ends after its last record, or, when the kill came after the end-of-file blank that closes
            # that record's file, at the start of the next file
            file_size = store.config.mapped_file_size_commit_log
            assert report.end_offset in (last_end, (last_end // file_size + 1) * file_size), (last_end, report)
            if rebuilt:
                # no ConsumeQueue survived: recovery re-dispatched the whole CommitLog
                assert recorder.seen == everything
            else:
                # re-dispatched from the end the queues confirmed, once each, in order, to the recovered end
                start = recorder.seen[0].commit_log_offset if recorder.seen else report.end_offset
                assert recorder.seen == records(store.commit_log.queue, levels, start)
            assert_queues_hold(store, everything)
            # new puts continue the same sequence
            before = len(recorder.seen)
            for i in range(50):
                assert (await store.put(message(5_000_000 + i, queue_id=i % 4))).status is PutStatus.PUT_OK
            await dispatched(store)
            after = records(store.commit_log.queue, levels)
            assert recorder.seen[before:] == after[len(everything) :]
            assert len(after) == len(everything) + 50
            assert_queues_hold(store, after)
        finally:
            await store.shutdown()

    asyncio.run(main())


def test_recovery_after_kill_9_dispatches_each_record_once_in_order(tmp_path: Path) -> None:
    _write_and_get_killed(tmp_path)
    _recover_and_check(tmp_path, rebuilt=False)


def test_recovery_rebuilds_lost_consume_queues_from_the_commit_log(tmp_path: Path) -> None:
    _write_and_get_killed(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue")
    _recover_and_check(tmp_path, rebuilt=True)


def test_a_slave_fed_by_ha_dispatches_each_record_once_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        master_store = MessageStore(small_config(tmp_path / "master"))
        await master_store.start()
        ha = HAMaster(master_store, HASettings(role="ASYNC_MASTER", listen_host="127.0.0.1", listen_port=0))
        port = await ha.start()
        master_store.set_replica(ha)
        slave_store = MessageStore(small_config(tmp_path / "slave", broker_role="SLAVE"))
        recorder = Recorder()
        slave_store.reput.add_dispatcher(recorder)
        await slave_store.start()
        settings = HASettings(
            role="SLAVE", master_address=f"127.0.0.1:{port}", file_size=FILE_SIZE, full_transfer_from_empty=True
        )
        client = HAClient(slave_store, settings, lambda: None)
        client.start()
        try:
            for i in range(400):  # replicated while it is written: records cut across transfers
                assert (await master_store.put(varied(i))).status is PutStatus.PUT_OK
                if i % 40 == 0:
                    await asyncio.sleep(0.01)
            for _ in range(1000):
                if slave_store.max_phy_offset == master_store.max_phy_offset and not slave_store.dispatch_behind_bytes:
                    break
                await asyncio.sleep(0.01)
            assert slave_store.max_phy_offset == master_store.max_phy_offset
            await dispatched(slave_store)
            expected = records(master_store.commit_log.queue, master_store.config.delay_levels())
            assert records(slave_store.commit_log.queue, slave_store.config.delay_levels()) == expected
            assert recorder.seen == expected
            assert_queues_hold(slave_store, expected)
        finally:
            await client.close()
            master_store.set_replica(None)
            await ha.close()
            await slave_store.shutdown()
            await master_store.shutdown()

    asyncio.run(main())


def test_the_reput_configuration_may_change_in_any_order(tmp_path: Path) -> None:
    """Whether `appended` writes units itself follows from the whole configuration, whatever the order of
    the calls that set it (MessageStore.start used to work in one order only)."""

    async def main() -> None:
        files = MappedFileQueue(tmp_path / "commitlog", FILE_SIZE)
        units = ConsumeQueueStore(tmp_path / "consumequeue")
        helper_told: list[int] = []
        orders = [
            ["index_in_process", "start", "index_helper"],
            ["start", "index_in_process", "index_helper"],
            ["index_helper", "start"],
            ["start", "index_helper"],
        ]
        for order in orders:
            reput = ReputService(files, units)
            for step in order:
                if step == "start":
                    reput.start()
                elif step == "index_in_process":
                    reput.set_index(batch=Batch())
                    assert not reput.dispatches_appended
                else:
                    reput.set_index(end_listener=helper_told.append)
            assert reput.dispatches_appended, order
            reput.add_dispatcher(Recorder())
            assert not reput.dispatches_appended, order
            await reput.close()
            assert not reput.dispatches_appended
        files.close()
        units.close()

    class Batch:
        def dispatch_batch(self, requests: list[DispatchRequest]) -> None:
            pass

    asyncio.run(main())
