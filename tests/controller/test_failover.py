"""Automatic failover with real processes: controllers, a NameServer and a group of master + 2 slaves in
controller mode (SYNC, allAckInSyncStateSet=true), a producer recording every acknowledged message, and the
master killed with SIGKILL. The controller elects a slave from the SyncStateSet, and every acknowledged
message is readable from the new master. The time from the kill to the new master is printed (not asserted).
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker.client import ClientConfig, Message, Producer, SendStatus
from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.message import decode_records
from tests.controller.controller_procs import Controllers
from tests.controller.failover_harness import Group, topic_fields, wait_for

pytestmark = pytest.mark.timeout(240)

TOPIC = "FailoverTopic"
QUEUES = 4
# puts time out after 1 s; a silent HA connection is dropped after 3 s
SHORT_TIMEOUTS = {"syncFlushTimeout": 1000, "haHousekeepingInterval": 3000}


async def _create_topic(group: Group, master_addr: str) -> None:
    reply = await group.request(master_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields(TOPIC, QUEUES))
    assert reply.code == ResponseCode.SUCCESS, reply.remark


async def _read_all(group: Group, addr: str) -> dict[str, int]:
    """Every message of TOPIC on one broker: UNIQ_KEY -> body CRC (records CRC-checked on decode)."""
    found: dict[str, int] = {}
    # every queue a route may hold: a broker that auto-created the topic gives it defaultTopicQueueNums (8)
    for qid in range(16):
        offset = 0
        while True:
            resp = await group.request(
                addr,
                RequestCode.PULL_MESSAGE,
                {
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
                },
            )
            if resp.code != ResponseCode.SUCCESS:
                break
            for m in decode_records(resp.body, verify_crc=True):
                found[m.properties["UNIQ_KEY"]] = zlib.crc32(m.body)
            offset = int(resp.ext_fields["nextBeginOffset"])
    return found


@dataclass
class SteadySends:
    """Four tasks sending 100-byte messages on `producer` until the block ends: the SEND_OK message ids with their
    body's CRC, every other reply or error by name, the message ids answered other than SEND_OK, and the time of
    the first SEND_OK after `mark` (set by the test: a fault's moment)."""

    producer: Producer
    acked: dict[str, int] = field(default_factory=dict)
    other: list[str] = field(default_factory=list)
    not_ok: list[str] = field(default_factory=list)
    mark: float | None = None
    first_ok_after_mark: float | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def __aenter__(self) -> SteadySends:
        self._tasks = [asyncio.create_task(self._steady(w)) for w in range(4)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _steady(self, worker: int) -> None:
        i = 0
        while not self._stop.is_set():
            body = os.urandom(100) + f"{worker}-{i}".encode()
            i += 1
            try:
                result = await self.producer.send(Message(TOPIC, body))
            except Exception as exc:  # no master, or a slave named master: sends fail until the route moves
                self.other.append(type(exc).__name__)
                await asyncio.sleep(0.05)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked[result.msg_id] = zlib.crc32(body)
                if self.mark is not None and self.first_ok_after_mark is None:
                    self.first_ok_after_mark = time.monotonic()
            else:
                self.other.append(result.status.name)
                self.not_ok.append(result.msg_id)

    async def more(self, count: int, group: Group) -> None:
        """Until `count` more sends are acknowledged."""
        target = len(self.acked) + count
        await wait_for(lambda: asyncio.sleep(0, len(self.acked) >= target), 60, f"{count} more sends", group)


@pytest.mark.parametrize("controllers", [1, 3])
async def test_kill9_of_the_master_elects_a_slave_with_every_acknowledged_message(tmp_path, controllers: int) -> None:
    group = Group(tmp_path, Controllers(tmp_path, count=controllers))
    client = ControllerClient(group.controllers.addresses)
    try:
        group.controllers.start_all()
        group.start_namesrv()
        for i in range(group.brokers):
            group.start_broker(i)

        async def full_set() -> tuple[dict[str, str], set[int]] | None:
            fields, members = await group.replica_info(client)
            return (fields, members) if len(members) == group.brokers and fields.get("masterAddress") else None

        fields, _ = await wait_for(full_set, 90, "a master with all 3 brokers in its SyncStateSet", group)
        master_addr, epoch = fields["masterAddress"], int(fields["masterEpoch"])
        master_index = group.index_of(master_addr)
        await _create_topic(group, master_addr)

        config = ClientConfig(namesrv_addr=group.namesrv_addr, instance_name="failover", poll_name_server_interval=1.0)
        async with (
            Producer("PG_FAILOVER", client_config=config, retry_times_when_send_failed=2, send_msg_timeout=3.0) as p,
            SteadySends(p) as sends,
        ):
            await sends.more(300, group)
            group.kill9(f"broker-n{master_index}")
            sends.mark = killed_at = time.monotonic()

            async def new_master() -> dict[str, str] | None:
                fields, _ = await group.replica_info(client)
                moved = fields.get("masterAddress") not in (None, "", master_addr)
                return fields if moved and int(fields["masterEpoch"]) > epoch else None

            elected = await wait_for(new_master, 60, "a new master", group)
            elected_at = time.monotonic()
            await wait_for(
                lambda: asyncio.sleep(0, sends.first_ok_after_mark is not None), 60, "a send to the new master", group
            )
            await asyncio.sleep(1.0)

        found = await _read_all(group, elected["masterAddress"])
        lost = [mid for mid, crc in sends.acked.items() if found.get(mid) != crc]
        first_ok = (sends.first_ok_after_mark or killed_at) - killed_at
        print(
            f"\nfailover ({controllers} controller(s)): new master {elected['masterAddress']} at epoch "
            f"{elected['masterEpoch']} elected {elected_at - killed_at:.2f} s after kill -9, first send "
            f"acknowledged {first_ok:.2f} s after; acknowledged {len(sends.acked)}, lost {len(lost)}, failed sends "
            f"{len(sends.other)}"
        )
        assert int(elected["masterEpoch"]) == epoch + 1
        assert not lost, f"{len(lost)} acknowledged messages missing on the new master\n{group.logs()}"
    finally:
        await client.close()
        group.stop_all()


async def _max_offset(group: Group, addr: str) -> int:
    reply = await group.request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return int(orjson.loads(reply.body)["table"]["commitLogMaxOffset"])


def _commit_log(root: Path, end: int) -> bytes:
    data = b"".join(p.read_bytes() for p in sorted((root / "commitlog").iterdir()) if p.name.isdigit())
    return data[:end]


async def test_old_master_returns_cuts_its_unacknowledged_tail_and_follows(tmp_path) -> None:
    group = Group(tmp_path, Controllers(tmp_path, count=1))
    client = ControllerClient(group.controllers.addresses)
    full_set = functools.partial(group.whole, client)
    try:
        group.start_all(**SHORT_TIMEOUTS)
        fields = await wait_for(full_set, 90, "a master with all 3 brokers in its SyncStateSet", group)
        old_addr, epoch = fields["masterAddress"], int(fields["masterEpoch"])
        old = group.index_of(old_addr)
        slaves = [i for i in range(group.brokers) if i != old]
        config = ClientConfig(namesrv_addr=group.namesrv_addr, instance_name="tail", poll_name_server_interval=1.0)
        async with Producer("PG_TAIL", client_config=config, retry_times_when_send_failed=0, send_msg_timeout=5.0) as p:
            for i in range(20):
                assert (await p.send(Message("TailTopic", f"acked-{i}".encode()))).status is SendStatus.SEND_OK
            replicated = await _max_offset(group, old_addr)
            # The slaves stop (SIGSTOP) and the controller dies (kill -9). The master drops its silent HA
            # connections after haHousekeepingInterval and cannot shrink its SyncStateSet (no controller), so
            # what it writes now reaches no replica and is acknowledged to nobody: the tail a deposed master keeps.
            for i in slaves:
                group.procs[f"broker-n{i}"].send_signal(signal.SIGSTOP)
            group.controllers.kill9(0)
            await asyncio.sleep(4.0)
            unacked = await asyncio.gather(
                *(p.send(Message("TailTopic", f"tail-{i}".encode())) for i in range(5)), return_exceptions=True
            )
            assert all(not hasattr(r, "status") or r.status is not SendStatus.SEND_OK for r in unacked), unacked
            tail_end = await _max_offset(group, old_addr)
            assert tail_end > replicated
            group.kill9(f"broker-n{old}")
            # the controller comes back from its Raft log (set {old, s1, s2}, master old) and elects a slave
            group.controllers.start(0)
            for i in slaves:
                group.procs[f"broker-n{i}"].send_signal(signal.SIGCONT)

        async def new_master() -> dict[str, str] | None:
            now, _ = await group.replica_info(client)
            others = {group.broker_addr(i) for i in slaves}
            return now if int(now.get("masterEpoch") or 0) > epoch and now.get("masterAddress") in others else None

        elected = await wait_for(new_master, 60, "a new master", group)
        new_addr = elected["masterAddress"]
        new_index = group.index_of(new_addr)
        # the old master comes back: it is a slave now, cuts its tail, replicates, and rejoins the set
        group.start_broker(old, **SHORT_TIMEOUTS)
        await wait_for(full_set, 90, "the old master back in the SyncStateSet", group)

        async def caught_up() -> int | None:
            mine, theirs = await _max_offset(group, old_addr), await _max_offset(group, new_addr)
            return theirs if mine == theirs else None

        end = await wait_for(caught_up, 60, "the old master at the new master's offset", group)
        assert _commit_log(tmp_path / f"n{old}", end) == _commit_log(tmp_path / f"n{new_index}", end)
        log = (tmp_path / f"broker-n{old}.log").read_text()
        assert f"CommitLog ends at {tail_end} but the master's history agrees only up to {replicated}" in log, log[
            -3000:
        ]
        assert end >= replicated
    finally:
        await client.close()
        group.stop_all()


async def test_a_slave_holding_the_deposed_masters_tail_cuts_it_when_the_master_moves(tmp_path) -> None:
    """Slave B replicated what the master M wrote while slave A was cut off (acknowledged to nobody: A stayed in
    the SyncStateSet and never confirmed it); then A becomes master. B must drop that tail before it follows
    A, or its CommitLog would hold M's bytes where A writes others."""
    group = Group(tmp_path, Controllers(tmp_path, count=1))
    client = ControllerClient(group.controllers.addresses)
    full_set = functools.partial(group.whole, client)
    try:
        group.start_all(**SHORT_TIMEOUTS)
        fields = await wait_for(full_set, 90, "a master with all 3 brokers in its SyncStateSet", group)
        m_addr, epoch = fields["masterAddress"], int(fields["masterEpoch"])
        m = group.index_of(m_addr)
        a, b = [i for i in range(group.brokers) if i != m]
        await _create_topic(group, m_addr)

        async def a_has_topic() -> bool:
            reply = await group.request(group.broker_addr(a), RequestCode.GET_ALL_TOPIC_CONFIG)
            return TOPIC in orjson.loads(reply.body)["topicConfigTable"]

        await wait_for(a_has_topic, 30, "slave A holding the topic", group)  # it serves it once master
        config = ClientConfig(namesrv_addr=group.namesrv_addr, instance_name="moved", poll_name_server_interval=1.0)
        producer = Producer("PG_MOVED", client_config=config, retry_times_when_send_failed=0, send_msg_timeout=5.0)
        async with producer as p:
            for i in range(20):
                await p.send(Message(TOPIC, f"acked-{i}".encode()))  # SEND_OK, or late for a loaded slave

            def level_with_m(*slaves: int) -> Any:
                async def check() -> int | None:
                    ends = {await _max_offset(group, group.broker_addr(i)) for i in (m, *slaves)}
                    return ends.pop() if len(ends) == 1 else None

                return check

            replicated = await wait_for(level_with_m(a, b), 30, "both slaves level with the master", group)
            b_level = level_with_m(b)

            # A stops and the controller dies: M drops A's silent HA connection after 3 s but cannot shrink its
            # SyncStateSet, so what it writes now reaches B alone and is acknowledged to nobody.
            group.procs[f"broker-n{a}"].send_signal(signal.SIGSTOP)
            group.controllers.kill9(0)
            await asyncio.sleep(4.0)
            unacked = await asyncio.gather(
                *(p.send(Message(TOPIC, f"tail-{i}".encode())) for i in range(5)), return_exceptions=True
            )
            assert all(not hasattr(r, "status") or r.status is not SendStatus.SEND_OK for r in unacked), unacked
            tail_end = await wait_for(b_level, 30, "slave B holding the unacknowledged tail", group)
            assert tail_end > replicated
        # B stops too and M dies; the controller comes back from its Raft log and, A being the only live
        # member of the set, elects A, which lacks the tail
        group.procs[f"broker-n{b}"].send_signal(signal.SIGSTOP)
        group.kill9(f"broker-n{m}")
        group.controllers.start(0)
        group.procs[f"broker-n{a}"].send_signal(signal.SIGCONT)

        async def a_master() -> dict[str, str] | None:
            now, _ = await group.replica_info(client)
            moved = int(now.get("masterEpoch") or 0) > epoch
            return now if moved and now.get("masterAddress") == group.broker_addr(a) else None

        await wait_for(a_master, 60, "A the master", group)
        group.procs[f"broker-n{b}"].send_signal(signal.SIGCONT)
        group.start_broker(m, **SHORT_TIMEOUTS)
        await wait_for(full_set, 90, "all three in A's SyncStateSet", group)
        async with Producer("PG_MOVED", client_config=config, send_msg_timeout=5.0) as p:
            # A writes on: each put waits 1 s for both slaves, which a loaded machine may miss (FLUSH_SLAVE_TIMEOUT)
            statuses = [(await p.send(Message(TOPIC, f"after-{i}".encode()))).status for i in range(20)]
            assert SendStatus.SEND_OK in statuses, statuses
        addrs = [group.broker_addr(i) for i in range(group.brokers)]

        async def level() -> int | None:
            ends = {await _max_offset(group, addr) for addr in addrs}
            return ends.pop() if len(ends) == 1 else None

        end = await wait_for(level, 60, "the three CommitLogs at one offset", group)
        master_log = _commit_log(tmp_path / f"n{a}", end)
        for i in (m, b):
            assert _commit_log(tmp_path / f"n{i}", end) == master_log, f"broker n{i} differs from the master"
        log = (tmp_path / f"broker-n{b}.log").read_text()
        assert f"CommitLog ends at {tail_end} but the master's history agrees only up to {replicated}" in log, log[
            -3000:
        ]
    finally:
        await client.close()
        group.stop_all()


async def test_handovers_under_load_keep_every_send_ok(tmp_path) -> None:
    """Planned handovers (electMaster of an in-sync slave, as the operator's rolls and scale-ins ask) while four
    producers send: a put the old master still waits on when it becomes a slave answers FLUSH_SLAVE_TIMEOUT,
    never SEND_OK, and every SEND_OK message is readable from the last master, byte for byte."""
    group = Group(tmp_path, Controllers(tmp_path, count=1))
    client = ControllerClient(group.controllers.addresses)
    full_set = functools.partial(group.whole, client)
    try:
        group.start_all()
        fields = await wait_for(full_set, 90, "a master with all 3 brokers in its SyncStateSet", group)
        await _create_topic(group, fields["masterAddress"])
        config = ClientConfig(namesrv_addr=group.namesrv_addr, instance_name="handover", poll_name_server_interval=1.0)
        masters = [fields["masterAddress"]]
        async with (
            Producer("PG_HANDOVER", client_config=config, send_msg_timeout=5.0) as producer,
            SteadySends(producer) as sends,
        ):
            for _ in range(3):
                await sends.more(200, group)
                fields = await wait_for(full_set, 60, "every broker in the SyncStateSet", group)
                _, members = await group.replica_info(client)
                target = min(members - {int(fields["masterBrokerId"])})
                reply = await client.elect_master("DefaultCluster", "broker-a", target)
                assert reply.code == ResponseCode.SUCCESS, reply.remark
                masters.append(reply.ext_fields["masterAddress"])
            await sends.more(200, group)
        assert len(set(masters[-2:])) == 2, masters
        found = await _read_all(group, masters[-1])
        lost = [mid for mid, crc in sends.acked.items() if found.get(mid) != crc]
        print(
            f"\nhandovers {' -> '.join(masters)}: acknowledged {len(sends.acked)}, lost {len(lost)}, other replies "
            f"{len(sends.other)} ({sorted(set(sends.other))}), of which {sum(m in found for m in sends.not_ok)} "
            "stored messages are readable"
        )
        assert not lost, f"{len(lost)} acknowledged messages missing on the last master\n{group.logs()}"
    finally:
        await client.close()
        group.stop_all()
