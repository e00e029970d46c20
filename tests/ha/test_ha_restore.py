"""A master whose store is behind its slave's restores from the slave before it serves; real `mqnamesrv` /
`mqbroker` processes on loopback (netns_harness.py), each on free ports.

- SYNC_MASTER and ASYNC_MASTER: messages acknowledged, the master killed with SIGKILL and its store
  deleted (ephemeral storage), restarted: it restores the CommitLog and the metadata from its slave before
  it registers; every acknowledged message is readable from it at its queue offset, the topic, the
  subscription group and the consumer and delay offsets are back, new sends continue every queue, and the
  slave keeps replicating.
- A master killed with its store intact: no restore.
- The slave hung (SIGSTOP: registered, silent) when the empty master starts: the master starts after a
  bounded wait and says so; the slave, back, reports that its data diverged (runtime info haDiverged),
  and its report acknowledges nothing on the SYNC_MASTER.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker.protocol.bodies import fastjson_loads
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.message import decode_records
from broker.protocol.properties import encode_properties
from tests.ha.netns_harness import Brokers, NetLab, Proc, close_connections, request, runtime_info, wait_for

QUEUES = 4
TOPIC = "RestoreTopic"
GROUP = "CG_RESTORE"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class Group:
    """A NameServer, a master and its slave as processes on loopback."""

    def __init__(self, root: Path, role: str, **extra: Any) -> None:
        self.root = root
        self.env = Brokers(NetLab.loopback(["h"]), root)
        self.env.start_namesrv()
        m_port, m_ha, s_port, s_ha = free_ports(4)
        self.master, self.m_addr = self.env.broker("h", "bk-r", 0, role, m_port, haListenPort=m_ha, **extra)
        self.slave, self.s_addr = self.env.broker("h", "bk-r", 1, "SLAVE", s_port, haListenPort=s_ha, **extra)
        self.procs = self.env.procs

    async def start(self, proc: Proc) -> None:
        proc.start()
        addr = self.m_addr if proc is self.master else self.s_addr
        # a broker checking its slaves answers SYSTEM_BUSY (no runtime info) until it is done
        await wait_for(lambda: runtime_info(addr), 60, f"{proc.name} to answer", self.procs)

    async def slave_connected(self) -> None:
        async def check() -> bool:
            return (await runtime_info(self.m_addr))["haConnectedSlaves"] == "1"

        await wait_for(check, 30, "the slave's HA connection", self.procs)

    async def slave_caught_up(self) -> int:
        end = int((await runtime_info(self.m_addr))["commitLogMaxOffset"])

        async def check() -> bool:
            return int((await runtime_info(self.s_addr))["commitLogMaxOffset"]) == end

        await wait_for(check, 30, f"the slave to reach {end}", self.procs)
        return end

    def lose_master_store(self) -> None:
        self.master.kill9()
        shutil.rmtree(self.root / "bk-r-0")

    def log(self, proc: Proc) -> str:
        return proc.log_path.read_text(errors="replace")

    def stop(self) -> None:
        close_connections()
        self.env.stop_all()


async def create_topic(addr: str) -> None:
    fields = {
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "readQueueNums": QUEUES,
        "writeQueueNums": QUEUES,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }
    resp = await request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    assert resp.code == 0, resp.remark


async def send(addr: str, i: int, body: bytes, **props: str) -> tuple[int, dict[str, str]]:
    fields = {
        "a": "PG_RESTORE",
        "b": TOPIC,
        "c": "TBW102",
        "d": QUEUES,
        "e": i % QUEUES,
        "f": 0,
        "g": 0,
        "h": 0,
        "i": encode_properties({"UNIQ_KEY": f"R{i:08d}", **props}),
        "j": 0,
    }
    resp = await request(addr, RequestCode.SEND_MESSAGE_V2, fields, body, timeout=10.0)
    return resp.code, dict(resp.ext_fields)


class Acked:
    """Every acknowledged send: UNIQ_KEY -> (msgId, queueId, queueOffset, body CRC)."""

    def __init__(self) -> None:
        self.sent: dict[str, tuple[str, int, int, int]] = {}
        self.n = 0

    async def send_many(self, addr: str, count: int, size: int = 2000) -> None:
        async def one(i: int) -> None:
            body = f"{i}:".encode() + zlib.crc32(str(i).encode()).to_bytes(4, "big") * (size // 4)
            code, ext = await send(addr, i, body)
            assert code == ResponseCode.SUCCESS, (code, ext)
            self.sent[f"R{i:08d}"] = (ext["msgId"], int(ext["queueId"]), int(ext["queueOffset"]), zlib.crc32(body))

        for start in range(self.n, self.n + count, 16):
            await asyncio.gather(*(one(i) for i in range(start, min(start + 16, self.n + count))))
        self.n += count


async def read_all(addr: str) -> dict[str, tuple[int, int, int]]:
    """UNIQ_KEY -> (queueId, queueOffset, body CRC) of every message of the topic on one broker."""
    found: dict[str, tuple[int, int, int]] = {}
    for qid in range(QUEUES):
        offset = 0
        while True:
            fields = {
                "consumerGroup": "VERIFY",
                "topic": TOPIC,
                "queueId": qid,
                "queueOffset": offset,
                "maxMsgNums": 32,
                "sysFlag": 0x4,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": 0,
            }
            resp = await request(addr, RequestCode.PULL_MESSAGE, fields)
            if resp.code != ResponseCode.SUCCESS:
                break
            for m in decode_records(resp.body, verify_crc=True):
                found[m.properties["UNIQ_KEY"]] = (m.queue_id, m.queue_offset, zlib.crc32(m.body))
            offset = int(resp.ext_fields["nextBeginOffset"])
    return found


async def fetch(addr: str, code: int) -> dict[str, Any]:
    resp = await request(addr, code)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    data: dict[str, Any] = fastjson_loads(resp.body)
    return data


async def consumer_offset(addr: str, queue_id: int) -> int:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id}
    resp = await request(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
    return int(resp.ext_fields.get("offset", -1)) if resp.code == ResponseCode.SUCCESS else -1


async def set_up_group_and_offsets(g: Group) -> None:
    group = orjson.dumps({"groupName": GROUP, "retryMaxTimes": 7})
    resp = await request(g.m_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    for q in range(QUEUES):
        fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": q, "commitOffset": 10 + q}
        resp = await request(g.m_addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


RESTART_LINE = "this master's CommitLog ends at 0 but slave"


def _booted_after_restore(g: Group):  # type: ignore[no-untyped-def]
    # each boot says "boot success" twice in this log (the log record, then the line on stdout), so the
    # restarted master's boot is the one after its restore began, not a count
    async def check() -> bool:
        log = g.log(g.master)
        return RESTART_LINE in log and "boot success" in log[log.rindex(RESTART_LINE) :]

    return check


def _master_matches_slave(g: Group):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        s_off = [await consumer_offset(g.s_addr, q) for q in range(QUEUES)]
        s_delay = (await fetch(g.s_addr, RequestCode.GET_ALL_DELAY_OFFSET)).get("offsetTable") or {}
        groups = (await fetch(g.s_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))["subscriptionGroupTable"]
        return s_off == [10 + q for q in range(QUEUES)] and bool(s_delay) and GROUP in groups

    return check


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
async def test_master_that_lost_its_store_restores_from_its_slave_before_serving(tmp_path: Path, role: str) -> None:
    g = Group(tmp_path, role)
    try:
        await g.start(g.master)
        await g.start(g.slave)
        await g.slave_connected()
        await create_topic(g.m_addr)
        acked = Acked()
        await acked.send_many(g.m_addr, 600)  # ~1.3 MB: the CommitLog spans two 1 MiB files
        # a delayed message: the schedule service moves it on and records a delay offset
        code, _ext = await send(g.m_addr, 10_000, b"delayed", DELAY="1")
        assert code == ResponseCode.SUCCESS
        await set_up_group_and_offsets(g)
        # the slave holds it all: the CommitLog and, by its metadata sync, topics, groups and offsets
        await wait_for(_master_matches_slave(g), 30, "the slave's copy of the metadata", g.procs)
        end = await g.slave_caught_up()
        assert end > 1 << 20
        slave_delay = (await fetch(g.s_addr, RequestCode.GET_ALL_DELAY_OFFSET))["offsetTable"]

        g.lose_master_store()
        await g.start(g.master)

        info = await runtime_info(g.m_addr)
        assert info["restoreFromSlave"] == "restored", info.get("restoreFromSlave")
        assert info["restoreFromSlaveAddr"] == g.s_addr
        assert int(info["restoreFromSlaveBytes"]) == end
        assert int(info["commitLogMaxOffset"]) >= end
        # the broker answers once its processors are registered, a moment before its HA port and registration
        await wait_for(_booted_after_restore(g), 30, "the restarted master's boot line", g.procs)
        log = g.log(g.master)
        restart = log.rindex(RESTART_LINE)
        restored_at = log.index(f"restored {end} bytes of CommitLog [0, {end}) from slave {g.s_addr}", restart)
        # restored before the HA port was bound and before the broker registered (boot success)
        assert restored_at < log.index("HA service listening", restart) < log.index("boot success", restart)

        # every acknowledged message, at its queue and queue offset, with its body
        found = await read_all(g.m_addr)
        for key, (_msg_id, qid, qoff, crc) in acked.sent.items():
            assert found.get(key) == (qid, qoff, crc), key
        # the metadata is back
        topics = (await fetch(g.m_addr, RequestCode.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]
        assert topics[TOPIC]["readQueueNums"] == QUEUES and topics[TOPIC]["writeQueueNums"] == QUEUES
        groups = (await fetch(g.m_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))["subscriptionGroupTable"]
        assert groups[GROUP]["retryMaxTimes"] == 7
        assert [await consumer_offset(g.m_addr, q) for q in range(QUEUES)] == [10 + q for q in range(QUEUES)]
        assert (await fetch(g.m_addr, RequestCode.GET_ALL_DELAY_OFFSET))["offsetTable"] == slave_delay

        # the slave replicates from the restored master again; new sends continue every queue
        await g.slave_connected()
        before = dict(acked.sent)
        await acked.send_many(g.m_addr, 80)
        found = await read_all(g.m_addr)
        for key, (_msg_id, qid, qoff, crc) in acked.sent.items():
            assert found.get(key) == (qid, qoff, crc), key
        positions = [(qid, qoff) for _m, qid, qoff, _c in acked.sent.values()]
        assert len(set(positions)) == len(positions)  # no queue offset was handed out twice
        assert all(acked.sent[k] == v for k, v in before.items())
        await g.slave_caught_up()
        s_info = await runtime_info(g.s_addr)
        assert s_info["haDiverged"] == "" and s_info["haConnected"] == "true"
        assert "AHEAD" not in g.log(g.slave)
    finally:
        g.stop()


async def test_master_with_its_store_intact_starts_without_a_restore(tmp_path: Path) -> None:
    g = Group(tmp_path, "ASYNC_MASTER")
    try:
        await g.start(g.master)
        await g.start(g.slave)
        await g.slave_connected()
        await create_topic(g.m_addr)
        acked = Acked()
        await acked.send_many(g.m_addr, 100)
        end = await g.slave_caught_up()
        g.master.kill9()
        await g.start(g.master)
        info = await runtime_info(g.m_addr)
        assert info["restoreFromSlave"] == "not needed"
        assert int(info["commitLogMaxOffset"]) == end
        assert "restoring from its HA restore source" not in g.log(g.master)
        found = await read_all(g.m_addr)
        assert all(found.get(k) == (q, o, c) for k, (_m, q, o, c) in acked.sent.items())
    finally:
        g.stop()


async def test_empty_master_with_its_slave_down_starts_and_the_slave_reports_divergence(tmp_path: Path) -> None:
    g = Group(tmp_path, "SYNC_MASTER")
    try:
        await g.start(g.master)
        await g.start(g.slave)
        await g.slave_connected()
        await create_topic(g.m_addr)
        acked = Acked()
        await acked.send_many(g.m_addr, 100)
        end = await g.slave_caught_up()
        # frozen: still registered with the NameServer, its connections open, and silent (a hung pod)
        assert g.slave.popen is not None
        os.kill(g.slave.popen.pid, signal.SIGSTOP)
        g.lose_master_store()
        await g.start(g.master)
        info = await runtime_info(g.m_addr)
        assert info["restoreFromSlave"] == "no registered slave answered"
        assert int(info["commitLogMaxOffset"]) == 0
        assert "CommitLog is empty and no registered slave answered" in g.log(g.master)
        # the empty master takes writes (stored; SLAVE_NOT_AVAILABLE without a slave), fewer than the slave holds
        await create_topic(g.m_addr)
        code, _ext = await send(g.m_addr, 0, b"after the loss")
        assert code in (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE)

        os.kill(g.slave.popen.pid, signal.SIGCONT)

        async def diverged() -> str:
            return (await runtime_info(g.s_addr))["haDiverged"]

        why = await wait_for(diverged, 30, "the slave to report divergence", g.procs)
        assert "AHEAD" in why
        s_info = await runtime_info(g.s_addr)
        assert int(s_info["commitLogMaxOffset"]) == end  # nothing truncated or overwritten
        m_info = await runtime_info(g.m_addr)
        # the diverged slave's report acknowledges nothing: SYNC_MASTER does not count it
        assert int(m_info["haPush2SlaveMaxOffset"]) <= int(m_info["commitLogMaxOffset"]) < end
        code, _ext = await send(g.m_addr, 1, b"not replicated")
        assert code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        g.stop()
