"""The HA building blocks without sockets: report framing, start-offset rule, SYNC waiter, lag status,
pull suggestions."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from broker.ha.protocol import HEADER, ReportReader, encode_header, encode_report, transfer_start
from broker.ha.reads import PullSuggestion
from broker.ha.status import ReplicationStatus
from broker.ha.transfer import GroupTransfer
from broker.protocol.codes import ResponseCode
from broker.server.restore import SlaveState
from broker.store.results import PutResult, PutStatus


def test_report_reader_takes_last_complete_frame_in_any_split() -> None:
    stream = encode_report(100) + encode_report(2_000) + encode_report(1 << 40)
    for cut in range(len(stream) + 1):
        r = ReportReader()
        first = r.feed(stream[:cut])
        second = r.feed(stream[cut:])
        expected_first = [None, 100, 2_000, 1 << 40][cut // 8]
        assert first == expected_first
        assert second == (1 << 40 if cut < len(stream) else None)


def test_header_layout_is_int64_then_int32_big_endian() -> None:
    assert encode_header(0x0102030405060708, 32768) == bytes.fromhex("0102030405060708") + struct.pack(">i", 32768)
    assert HEADER.size == 12


def test_transfer_start_rules() -> None:
    size = 1 << 20
    assert transfer_start(0, 0, size) == 0  # empty master
    assert transfer_start(0, 3 * size + 5, size) == 3 * size  # empty slave: the master's last file only
    assert transfer_start(0, 2 * size, size) == 2 * size
    assert transfer_start(12345, 3 * size + 5, size) == 12345  # otherwise exactly where the slave is


async def test_group_transfer_wakes_acked_puts_and_times_out_the_rest() -> None:
    gt = GroupTransfer(timeout_s=0.2)
    early = gt.wait(100, PutResult(PutStatus.PUT_OK))
    late = gt.wait(500, PutResult(PutStatus.PUT_OK))
    assert isinstance(early, asyncio.Future) and isinstance(late, asyncio.Future)
    assert gt.waiting == 2
    await asyncio.sleep(0.01)
    gt.acked_to(150)
    assert (await early).status is PutStatus.PUT_OK
    assert (await late).status is PutStatus.FLUSH_SLAVE_TIMEOUT  # nobody acked 500 in time
    already = PutResult(PutStatus.PUT_OK)
    assert gt.wait(120, already) is already  # already acked: no future, no wait
    pending = gt.wait(900, PutResult(PutStatus.PUT_OK))
    gt.fail_all(PutStatus.FLUSH_SLAVE_TIMEOUT)  # shutdown answers at once
    assert isinstance(pending, asyncio.Future) and pending.result().status is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert gt.waiting == 0


def test_replication_status_lag_per_put() -> None:
    now = [0.0]
    st = ReplicationStatus(clock=lambda: now[0])
    st.record_put(100)
    now[0] = 0.010
    st.record_put(200)
    now[0] = 0.030
    assert st.snapshot().lag_ms == 30.0 and st.snapshot(200).lag_bytes == 200
    st.record_ack(100)  # the first put took 30 ms to be acknowledged
    now[0] = 0.050
    st.record_ack(250)  # the second 40 ms
    snap = st.snapshot(250)
    assert snap.lag_bytes == 0 and snap.lag_ms == 0.0 and snap.samples == 2
    assert round(snap.p50_ms) in (30, 40) and round(snap.p99_ms) == 40


def _record(phy: int) -> memoryview:
    buf = bytearray(96)
    struct.pack_into(">q", buf, 28, phy)
    return memoryview(buf)


def test_pull_suggestion_master_and_slave_rules() -> None:
    kw: dict[str, Any] = {
        "group_broker_id": 0,
        "group_slow_broker_id": 1,
        "master_alive": True,
        "request_offset": 5,
        "next_begin_offset": 9,
    }
    plain = PullSuggestion(slave_read_enable=False, is_slave=False, memory_ratio_percent=40)
    assert plain.decide(0, found=[_record(0)], commit_log_max_offset=1 << 40, **kw) == (0, 0, 9)
    # slaveReadEnable with 0% of RAM: any lag sends the consumer to whichBrokerWhenConsumeSlowly
    reads = PullSuggestion(slave_read_enable=True, is_slave=False, memory_ratio_percent=0)
    assert reads.decide(0, found=[_record(0)], commit_log_max_offset=1000, **kw) == (1, 0, 9)
    assert reads.decide(0, found=[_record(900)], commit_log_max_offset=900, **kw) == (0, 0, 9)
    # a slave whose master lives sends consumers back; what it found is still delivered
    slave = PullSuggestion(slave_read_enable=False, is_slave=True, memory_ratio_percent=40)
    retry = ResponseCode.PULL_RETRY_IMMEDIATELY
    assert slave.decide(ResponseCode.PULL_NOT_FOUND, found=[], commit_log_max_offset=0, **kw) == (0, retry, 9)
    assert slave.decide(0, found=[_record(0)], commit_log_max_offset=10, **kw) == (0, 0, 9)
    # ... and serves like a master while its master is down (long polling included)
    kw["master_alive"] = False
    assert slave.decide(ResponseCode.PULL_NOT_FOUND, found=[], commit_log_max_offset=0, **kw) == (
        0,
        ResponseCode.PULL_NOT_FOUND,
        9,
    )
    # but never moves the consumer's offset: the master may have what the slave lacks
    assert slave.decide(ResponseCode.PULL_OFFSET_MOVED, found=[], commit_log_max_offset=0, **kw) == (0, retry, 5)


def test_slave_state_finds_the_restore_source_address() -> None:
    table = {"commitLogMaxOffset": "20470", "commitLogMinOffset": "0", "haRestoreSource": "true"}
    own = SlaveState.of(1, "10.0.0.2:10911", {**table, "haServerAddr": "10.0.1.2:10912", "haListenPort": "10912"})
    assert own.ha_addr == "10.0.1.2:10912" and own.max_offset == 20470 and own.diverged == ""
    # without haServerAddr: the slave's host and its HA listen port
    assert SlaveState.of(1, "10.0.0.2:10911", {**table, "haListenPort": "10912"}).ha_addr == "10.0.0.2:10912"
    # a slave that runs no restore source (or an older broker) offers none
    older = SlaveState.of(2, "10.0.0.3:10911", {"commitLogMaxOffset": "5", "haDiverged": "AHEAD of the master"})
    assert older.ha_addr is None and older.diverged == "AHEAD of the master"
