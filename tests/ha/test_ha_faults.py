"""HA under faults, with real processes: `mqnamesrv` in the test's namespace, each broker host (master
"m", slave "s") in its own network namespace built by the fixture (netns_harness.py).

- SYNC_MASTER under a steady SDK producer, master killed with SIGKILL: every acknowledged message is
  on the slave (count, ids, CRC); a push consumer keeps consuming from the slave, returns to the master
  once it is back, and no message is skipped.
- Link between master and slave cut with iptables: SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT, then
  SLAVE_NOT_AVAILABLE once the master drops the silent slave; ASYNC_MASTER keeps answering SEND_OK;
  after healing both slaves catch up and their CommitLogs are byte-identical to their masters'. Then a
  slave restarted with an empty disk rebuilds every file from its master.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import (
    ClientConfig,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import decode_records
from broker.protocol.properties import encode_properties
from tests.ha.netns_harness import (
    Brokers,
    NetLab,
    Proc,
    close_connections,
    commit_log_bytes,
    request,
    runtime_info,
    wait_for,
)

QUEUES = 4


@pytest.fixture(scope="module")
def lab() -> Iterator[NetLab]:
    why = NetLab.available()
    if why is not None:
        warnings.warn(f"no network namespaces ({why}): HA fault tests run on loopback", stacklevel=1)
        yield NetLab.loopback(["m", "s"])
        return
    net = NetLab(hosts=["m", "s"])
    try:
        net.setup()
        yield net
    finally:
        net.teardown()


async def create_topic(addr: str, topic: str) -> None:
    resp = await request(
        addr,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": QUEUES,
            "writeQueueNums": QUEUES,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "order": "false",
        },
    )
    assert resp.code == 0, resp.remark


async def pull(addr: str, topic: str, queue_id: int, offset: int, group: str = "VERIFY") -> RemotingCommand:
    return await request(
        addr,
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": 32,
            "sysFlag": 0x4,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
        },
    )


async def read_all(addr: str, topic: str) -> dict[str, int]:
    """Every message of the topic on one broker: UNIQ_KEY -> body CRC (records CRC-checked on decode)."""
    found: dict[str, int] = {}
    for qid in range(QUEUES):
        offset = 0
        while True:
            resp = await pull(addr, topic, qid, offset)
            if resp.code != ResponseCode.SUCCESS:
                break
            for m in decode_records(resp.body, verify_crc=True):
                found[m.properties["UNIQ_KEY"]] = zlib.crc32(m.body)
            offset = int(resp.ext_fields["nextBeginOffset"])
    return found


async def started(proc: Proc, addr: str, procs: list[Proc]) -> None:
    proc.start()
    await wait_for(lambda: runtime_info(addr), 40, f"{proc.name} to answer", procs)


async def slave_connected(master_addr: str, procs: list[Proc]) -> None:
    async def check() -> bool:
        return (await runtime_info(master_addr))["haConnectedSlaves"] == "1"

    await wait_for(check, 30, "the slave's HA connection", procs)


async def test_sync_master_killed_nothing_acknowledged_lost_consumer_fails_over_and_back(
    lab: NetLab, tmp_path: Path
) -> None:
    env = Brokers(lab, tmp_path)
    env.start_namesrv()
    master, m_addr = env.broker("m", "bk-sync", 0, "SYNC_MASTER", 10911)
    slave, s_addr = env.broker("s", "bk-sync", 1, "SLAVE", 10911)
    procs = env.procs
    consumer: PushConsumer | None = None
    try:
        await started(master, m_addr, procs)
        await started(slave, s_addr, procs)
        await slave_connected(m_addr, procs)
        topic = "FailTopic"
        await create_topic(m_addr, topic)
        # the slave learns the topic through metadata sync; it cannot serve pulls before that
        await wait_for(lambda: _slave_knows(s_addr, topic), 20, "the topic on the slave", procs)

        consumed: dict[str, int] = {}
        # shut until the master is dead: what the consumer has pulled waits, so a backlog is left for the slave
        # to serve however fast the sends go
        gate = asyncio.Event()

        async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            await gate.wait()
            for m in msgs:
                consumed[m.msg_id] = zlib.crc32(m.body)
            return ConsumeStatus.CONSUME_SUCCESS

        cc = ClientConfig(namesrv_addr=env.namesrv_addr, instance_name="ha-consumer")
        consumer = PushConsumer(
            "CG_FAIL",
            client_config=cc,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_thread_min=2,
            consume_thread_max=2,
            pull_batch_size=4,
            pull_threshold_for_queue=8,
        )
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        await consumer.start()

        acked: dict[str, int] = {}
        other: list[str] = []
        stop = asyncio.Event()
        pcc = ClientConfig(namesrv_addr=env.namesrv_addr, instance_name="ha-producer")
        async with Producer(
            "PG_FAIL", client_config=pcc, retry_times_when_send_failed=0, send_msg_timeout=3.0
        ) as producer:

            async def steady(worker: int) -> None:
                i = 0
                while not stop.is_set():
                    body = os.urandom(200) + f"{worker}-{i}".encode()
                    i += 1
                    try:
                        r = await producer.send(Message(topic, body))
                    except Exception as exc:  # the master is gone: sends fail until we stop
                        other.append(type(exc).__name__)
                        await asyncio.sleep(0.05)
                        continue
                    if r.status is SendStatus.SEND_OK:
                        acked[r.msg_id] = zlib.crc32(body)
                    else:
                        other.append(r.status.name)

            workers = [asyncio.create_task(steady(w)) for w in range(8)]
            await wait_for(_at_least(acked, 300), 30, "300 acknowledged sends", procs)
            master.kill9()  # sends are in flight right now
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*workers)
        assert len(acked) >= 300
        # what the consumer had not consumed when the master died can only come from the slave now
        backlog = set(acked) - set(consumed)
        assert len(backlog) > 50, f"no backlog left for the slave: {len(acked)} acked, {len(consumed)} consumed"
        gate.set()

        # 1. every acknowledged message is on the slave: ids, count and body CRC
        on_slave = await read_all(s_addr, topic)
        missing = set(acked) - set(on_slave)
        assert not missing, f"{len(missing)} acknowledged messages are not on the slave"
        assert all(on_slave[k] == crc for k, crc in acked.items())

        # 2. the consumer drains the backlog from the slave while the master is down
        await wait_for(_covers(consumed, acked), 60, "the consumer to get every message from the slave", procs)
        slave_info = await runtime_info(s_addr)
        assert int(slave_info["msgGetTotalTodayNow"]) > 0 and slave_info["haConnected"] == "false"

        # 3. the master comes back (recovering after the kill); new messages come through it
        await started(master, m_addr, procs)
        await slave_connected(m_addr, procs)
        later: dict[str, int] = {}
        async with Producer("PG_FAIL", client_config=pcc, retry_times_when_send_failed=2) as producer:

            async def send_one() -> None:
                body = f"after-restart-{len(later)}".encode()
                r = await producer.send(Message(topic, body))
                assert r.status is SendStatus.SEND_OK
                later[r.msg_id] = zlib.crc32(body)

            for _ in range(40):
                await send_one()
            await wait_for(_covers(consumed, later), 60, "the consumer to get the new messages", procs)
            # The consumer goes back to the restarted master (its counters start at zero). If it read
            # all 40 from the slave before switching, only a message sent after the switch shows it.
            served = _master_served(m_addr)

            async def served_after_one_more() -> bool:
                if await served():
                    return True
                await send_one()
                return False

            await wait_for(served_after_one_more, 45, "pulls served by the master", procs)
        await wait_for(_covers(consumed, later), 60, "the consumer to get the last messages", procs)
        skipped = (set(acked) | set(later)) - set(consumed)
        assert not skipped
    finally:
        if consumer is not None:
            await consumer.shutdown(drain_timeout=2.0)
        close_connections()
        env.stop_all()


def _at_least(d: dict[str, int], n: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return len(d) >= n

    return check


def _covers(consumed: dict[str, int], wanted: dict[str, int]):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return all(consumed.get(k) == crc for k, crc in wanted.items())

    return check


def _master_served(addr: str):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return int((await runtime_info(addr))["msgGetTotalTodayNow"]) > 0

    return check


async def _slave_knows(addr: str, topic: str) -> bool:
    return (await pull(addr, topic, 0, 0)).code != ResponseCode.TOPIC_NOT_EXIST


async def send_raw(addr: str, topic: str, i: int) -> int:
    fields = {
        "a": "PG_RAW",
        "b": topic,
        "c": "TBW102",
        "d": QUEUES,
        "e": i % QUEUES,
        "f": 0,
        "g": 0,
        "h": 0,
        "i": encode_properties({"UNIQ_KEY": f"RAW{i:08d}"}),
        "j": 0,
    }
    resp = await request(addr, RequestCode.SEND_MESSAGE_V2, fields, os.urandom(2048), timeout=10.0)
    return resp.code


async def send_both(a: str, b: str, topic: str, i: int) -> tuple[int, int]:
    ca, cb = await asyncio.gather(send_raw(a, topic, i), send_raw(b, topic, i))
    return ca, cb


async def test_cut_link_sync_vs_async_heal_byte_identical_then_rebuild_from_empty(lab: NetLab, tmp_path: Path) -> None:
    if lab.on_loopback:
        pytest.skip("cutting the master-slave link needs network namespaces (root, ip, iptables)")

    env = Brokers(lab, tmp_path)
    env.start_namesrv()
    # two pairs across the same link: SYNC on ports 10911/10912, ASYNC on 10921/10922
    sm, sm_addr = env.broker("m", "bk-s", 0, "SYNC_MASTER", 10911, haFullTransferFromEmpty="true")
    ss, ss_addr = env.broker("s", "bk-s", 1, "SLAVE", 10911)
    am, am_addr = env.broker("m", "bk-a", 0, "ASYNC_MASTER", 10921)
    aslave, as_addr = env.broker("s", "bk-a", 1, "SLAVE", 10921)
    procs = env.procs
    try:
        for p, addr in ((sm, sm_addr), (am, am_addr), (ss, ss_addr), (aslave, as_addr)):
            await started(p, addr, procs)
        await slave_connected(sm_addr, procs)
        await slave_connected(am_addr, procs)
        for addr in (sm_addr, am_addr):
            await create_topic(addr, "CutTopic")
        n = 0
        for _ in range(600):  # ~1.3 MB per broker before the cut: two CommitLog files
            n += 1
            assert await send_both(sm_addr, am_addr, "CutTopic", n) == (0, 0)

        lab.cut("s", "m")
        sync_codes: list[int] = []
        async_codes: list[int] = []
        for _ in range(60):
            n += 1
            sync_code, async_code = await send_both(sm_addr, am_addr, "CutTopic", n)
            sync_codes.append(sync_code)
            async_codes.append(async_code)
            if (
                sync_codes[-1] == ResponseCode.SLAVE_NOT_AVAILABLE
                and sync_codes.count(ResponseCode.SLAVE_NOT_AVAILABLE) >= 3
            ):
                break
        # the silent slave first times the waits out, then the master drops it (housekeeping)
        assert sync_codes[0] == ResponseCode.FLUSH_SLAVE_TIMEOUT, sync_codes
        assert set(sync_codes) <= {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}
        assert sync_codes[-1] == ResponseCode.SLAVE_NOT_AVAILABLE, sync_codes
        assert async_codes == [ResponseCode.SUCCESS] * len(async_codes)
        for _ in range(300):  # ASYNC keeps accepting; the slaves fall behind
            n += 1
            _sync_code, async_code = await send_both(sm_addr, am_addr, "CutTopic", n)
            assert async_code == ResponseCode.SUCCESS

        lab.heal("s", "m")
        for m_addr, s_addr, m_name, s_name in (
            (sm_addr, ss_addr, "bk-s-0", "bk-s-1"),
            (am_addr, as_addr, "bk-a-0", "bk-a-1"),
        ):
            end = int((await runtime_info(m_addr))["commitLogMaxOffset"])
            assert end > 1 << 20  # several CommitLog files
            await wait_for(_caught_up(s_addr, end), 40, f"{s_name} to catch up to {end}", procs)
            assert commit_log_bytes(tmp_path / s_name, 0, end) == commit_log_bytes(tmp_path / m_name, 0, end)
        # SYNC_MASTER is fully back: sends are acknowledged by the slave again
        assert await send_raw(sm_addr, "CutTopic", n + 1) == ResponseCode.SUCCESS

        # the SYNC pair's slave loses its disk: it rebuilds every file from the master
        ss.kill9()
        shutil.rmtree(tmp_path / "bk-s-1")
        await started(ss, ss_addr, procs)
        end = int((await runtime_info(sm_addr))["commitLogMaxOffset"])
        await wait_for(_caught_up(ss_addr, end), 40, "the empty slave to rebuild", procs)
        assert commit_log_bytes(tmp_path / "bk-s-1", 0, end) == commit_log_bytes(tmp_path / "bk-s-0", 0, end)
        await wait_for(_slave_knows_count(ss_addr, "CutTopic", n + 1), 20, "the rebuilt slave's queues", procs)
    finally:
        close_connections()
        env.stop_all()


def _caught_up(addr: str, end: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return int((await runtime_info(addr))["commitLogMaxOffset"]) >= end

    return check


def _slave_knows_count(addr: str, topic: str, n: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        total = 0
        for q in range(QUEUES):
            resp = await request(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q})
            total += int(resp.ext_fields.get("offset", 0))
        return total == n

    return check
