"""Master and slave BrokerControllers in one process over loopback: streaming across CommitLog files,
SYNC_MASTER acknowledgements, slave refusal of sends, slave reads, metadata sync, runtime info,
the empty-slave start rule, and divergence detection."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import orjson
import pytest

from broker.client import Message, Producer, PullConsumer, SendStatus
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import decode_records
from broker.protocol.properties import encode_properties
from broker.server.broker import BrokerController
from broker.transport.client import connect
from tests.ha.ha_harness import FILE_SIZE, Pair, commit_log_bytes, eventually, pair

BODY = os.urandom(8000)  # incompressible: the producer compresses bodies over 4 KiB


@pytest.fixture(autouse=True)
def _ha_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="broker")


async def request(addr: str, code: int, ext: dict[str, object] | None = None, body: bytes = b"") -> RemotingCommand:
    conn = await connect(addr)
    try:
        cmd = RemotingCommand(code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body)
        return await conn.invoke(cmd, 5.0)
    finally:
        conn.close()


async def raw_send(addr: str, topic: str, body: bytes, *, wait: bool = True) -> RemotingCommand:
    properties = {"UNIQ_KEY": "U1"} if wait else {"UNIQ_KEY": "U1", "WAIT": "false"}
    fields = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": 0,
        "flag": 0,
        "properties": encode_properties(properties),
        "reconsumeTimes": 0,
    }
    return await request(addr, RequestCode.SEND_MESSAGE, fields, body)


async def raw_pull(addr: str, topic: str, offset: int, queue_id: int = 0) -> RemotingCommand:
    return await request(
        addr,
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "CG",
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


async def runtime_info(b: BrokerController) -> dict[str, str]:
    resp = await request(b.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    table: dict[str, str] = orjson.loads(resp.body)["table"]
    return table


async def connected(p: Pair) -> None:
    assert p.master is not None and p.master.ha is not None and p.master.ha.master is not None
    master = p.master.ha.master
    await eventually(lambda: master.slave_count == 1, what="the slave's HA connection")


async def produce(p: Pair, topic: str, n: int, concurrency: int = 16) -> list[SendStatus]:
    assert p.namesrv is not None
    async with Producer("PG", f"127.0.0.1:{p.namesrv.port}", retry_times_when_send_failed=0) as producer:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> SendStatus:
            async with sem:
                r = await producer.send(Message(topic, BODY + str(i).encode(), keys=f"k{i}"))
                return r.status

        return list(await asyncio.gather(*(one(i) for i in range(n))))


async def test_sync_master_streams_across_files_and_slave_serves_the_same_bytes(tmp_path: Path) -> None:
    async with pair(tmp_path, "SYNC_MASTER") as p:
        assert p.master is not None and p.slave is not None
        await connected(p)
        statuses = await produce(p, "HaTopic", 400)  # ~3.2 MiB: four 1 MiB CommitLog files
        assert statuses == [SendStatus.SEND_OK] * 400
        master, slave = p.master.store, p.slave.store
        end = master.max_phy_offset
        assert end > 3 * FILE_SIZE
        # SYNC_MASTER answered only after the slave acknowledged: it already holds everything
        assert slave.max_phy_offset == end
        assert commit_log_bytes(p.slave, 0, end) == commit_log_bytes(p.master, 0, end)
        # dispatched on the slave: its ConsumeQueues serve the messages
        total = sum(slave.get_max_offset_in_queue("HaTopic", q) for q in range(4))
        assert total == 400
        info = await runtime_info(p.master)
        assert info["haConnectedSlaves"] == "1" and info["haLagBytes"] == "0"
        assert int(info["haLagSamples"]) > 0 and float(info["haLagP99Ms"]) >= 0
        sinfo = await runtime_info(p.slave)
        assert sinfo["haRole"] == "SLAVE" and sinfo["haConnected"] == "true"
        assert sinfo["haSlaveMaxOffset"] == str(end) and sinfo["masterAddr"] == p.master.addr
        # a slave refuses sends, as the Java store does (SERVICE_NOT_AVAILABLE, with a remark)
        refused = await raw_send(p.slave.addr, "HaTopic", b"nope")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (refused.remark or "")
        # while its master lives, the slave delivers what it has but sends consumers back to the master;
        # it serves a topic once its periodic metadata sync brought the topic's config over
        await eventually(lambda: p.slave.topics.get("HaTopic") is not None, what="topic sync")
        got = await raw_pull(p.slave.addr, "HaTopic", 0)
        assert got.code == ResponseCode.SUCCESS and got.ext_fields["suggestWhichBrokerId"] == "0"
        assert len(list(decode_records(got.body))) > 0
        head = slave.get_max_offset_in_queue("HaTopic", 0)
        at_head = await raw_pull(p.slave.addr, "HaTopic", head)
        assert at_head.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert at_head.ext_fields["suggestWhichBrokerId"] == "0"


async def test_metadata_sync_copies_offsets_groups_and_topics(tmp_path: Path) -> None:
    async with pair(tmp_path, "ASYNC_MASTER") as p:
        assert p.master is not None and p.slave is not None
        m, s = p.master, p.slave
        resp = await request(
            m.addr,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": "MetaTopic",
                "defaultTopic": "TBW102",
                "readQueueNums": 2,
                "writeQueueNums": 2,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
            },
        )
        assert resp.code == 0
        m.offsets.commit("GroupM", "MetaTopic", 1, 42)
        m.groups.find("GroupM")  # auto-created on the master
        m.schedule.offsets[3] = 7
        await eventually(lambda: s.offsets.query("GroupM", "MetaTopic", 1) == 42, what="offset sync")
        await eventually(lambda: s.topics.get("MetaTopic") is not None, what="topic sync")
        await eventually(lambda: "GroupM" in s.groups.table, what="group sync")
        await eventually(lambda: s.schedule.offsets.get(3) == 7, what="delay offset sync")
        assert (Path(s.config.store_path_root_dir) / "config" / "consumerOffset.json").exists()


async def test_sync_master_without_slave_answers_slave_not_available_unless_told_not_to_wait(tmp_path: Path) -> None:
    p = Pair(tmp_path)
    await p.start_namesrv()
    try:
        master = await p.start_master("SYNC_MASTER")
        resp = await raw_send(master.addr, "Lonely", b"body")
        # stored all the same: the reply carries the send-result header
        assert resp.code == ResponseCode.SLAVE_NOT_AVAILABLE and resp.ext_fields.get("msgId")
        info = await runtime_info(master)
        assert info["haConnectedSlaves"] == "0" and int(info["haLagBytes"]) > 0
        # WAIT=false (setWaitStoreMsgOK(false)): the producer asked not to wait for a slave
        resp = await raw_send(master.addr, "Lonely", b"body", wait=False)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await p.stop()


async def test_empty_slave_starts_at_the_masters_last_file(tmp_path: Path) -> None:
    p = Pair(tmp_path)
    await p.start_namesrv()
    try:
        await p.start_master("ASYNC_MASTER")
        assert p.master is not None
        await produce(p, "Hist", 300)
        end = p.master.store.max_phy_offset
        last_file = end - end % FILE_SIZE
        assert last_file >= 2 * FILE_SIZE
        slave = await p.start_slave()
        await eventually(lambda: slave.store.max_phy_offset == end, what="the slave to catch up")
        assert slave.store.min_phy_offset == last_file  # reference 7: only the last file for an empty slave
        assert commit_log_bytes(slave, last_file, end) == commit_log_bytes(p.master, last_file, end)
        # its ConsumeQueues start mid-way and still serve what it has
        got = await raw_pull(slave.addr, "Hist", slave.store.get_min_offset_in_queue("Hist", 0))
        assert got.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY)
    finally:
        await p.stop()


async def test_slave_ahead_of_a_restored_master_stops_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pair(tmp_path)
    await p.start_namesrv()
    try:
        master = await p.start_master("ASYNC_MASTER", haListenPort=0)
        ha_port = master.config.ha_listen_port
        slave = await p.start_slave(haMasterAddress=f"127.0.0.1:{ha_port}")
        await produce(p, "Div", 50)
        end = master.store.max_phy_offset
        await eventually(lambda: slave.store.max_phy_offset == end, what="replication")
        await master.shutdown()
        # the master comes back from an older copy: an empty store, same HA address (without the restore
        # from its slave at start, which would otherwise bring the data back first)
        p.master = await p.start_master(
            "ASYNC_MASTER", store="master-restored", haListenPort=ha_port, restoreFromSlaveOnStart="false"
        )
        assert slave.ha is not None and slave.ha.client is not None
        client = slave.ha.client
        await eventually(lambda: client.diverged is not None, timeout=15, what="divergence detection")
        assert "AHEAD" in (client.diverged or "")
        assert slave.store.max_phy_offset == end  # nothing was truncated or overwritten
        assert any("slave is AHEAD of this master" in r.getMessage() for r in caplog.records)
        info = await runtime_info(slave)
        assert "AHEAD" in info["haDiverged"]
    finally:
        await p.stop()


async def test_a_consumer_starting_while_the_master_is_away_resumes_from_the_slave(tmp_path: Path) -> None:
    """The master stops (it unregisters): a pull consumer that starts then finds its group's committed offset
    and the queue's bounds on the slave (Java's findBrokerAddressInSubscribe), and reads the rest there."""

    async with pair(tmp_path, "ASYNC_MASTER") as p:
        assert p.master is not None and p.slave is not None and p.namesrv is not None
        namesrv = f"127.0.0.1:{p.namesrv.port}"
        await connected(p)
        assert set(await produce(p, "AwayTopic", 20)) == {SendStatus.SEND_OK}
        consumer = PullConsumer("AwayReaders", namesrv)
        consumer.subscribe("AwayTopic")
        await consumer.start()
        first: list[bytes] = []
        while len(first) < 5:
            first += [m.body for m in await consumer.poll(timeout=1.0)]
        await consumer.commit()
        await consumer.shutdown()

        def committed(broker: BrokerController) -> int:
            return sum(max(broker.offsets.query("AwayReaders", "AwayTopic", q), 0) for q in range(4))

        assert committed(p.master) == len(first)
        await eventually(lambda: committed(p.slave) == len(first), what="the offsets on the slave")
        await eventually(lambda: p.slave.topics.get("AwayTopic") is not None, what="the topic on the slave")
        await eventually(lambda: p.slave.store.max_phy_offset == p.master.store.max_phy_offset, what="catch-up")
        await p.master.shutdown()
        p.master = None
        later = PullConsumer("AwayReaders", namesrv)
        later.subscribe("AwayTopic")
        await later.start()
        rest: list[bytes] = []
        for _ in range(20):
            rest += [m.body for m in await later.poll(timeout=0.5)]
            if len(rest) >= 20 - len(first):
                break
        await later.shutdown()
        assert len(rest) == 20 - len(first) and not set(rest) & set(first), (len(rest), len(first))
