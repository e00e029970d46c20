"""Admin requests: topic creation (registered with the NameServer), topic listing, runtime info, view by id."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from broker.protocol.message import decode_offset_msg_id, decode_record
from tests.server.server_harness import cluster

CLUSTER_LIST_KEYS = {
    "brokerVersionDesc",
    "putTps",
    "getTransferredTps",
    "msgPutTotalTodayNow",
    "msgGetTotalTodayNow",
    "msgPutTotalYesterdayMorning",
    "msgGetTotalYesterdayMorning",
    "msgPutTotalTodayMorning",
    "msgGetTotalTodayMorning",
    "sendThreadPoolQueueSize",
    "pullThreadPoolQueueSize",
    "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "pageCacheLockTimeMills",
    "earliestMessageTimeStamp",
    "commitLogDiskRatio",
    "brokerActive",
}


async def test_create_topic_lists_and_registers_it(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        r = await cli.request(
            17,
            {
                "topic": "Made",
                "defaultTopic": "TBW102",
                "readQueueNums": 3,
                "writeQueueNums": 3,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
            },
        )
        assert r.code == 0, r.remark
        table = orjson.loads((await cli.request(21)).body)["topicConfigTable"]
        assert table["Made"]["readQueueNums"] == 3 and table["TBW102"]["perm"] == 7
        assert table["SCHEDULE_TOPIC_XXXX"]["readQueueNums"] == 18
        assert {
            "SELF_TEST_TOPIC",
            "BenchmarkTest",
            "TestCluster",
            "broker-t",
            "OFFSET_MOVED_EVENT",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "TestCluster_REPLY_TOPIC",
        } <= set(table)
        await asyncio.sleep(0.1)
        ns = await c.namesrv_client()
        route = orjson.loads((await ns.request(105, {"topic": "Made"}, version=479)).body)
        assert route["queueDatas"][0]["readQueueNums"] == 3
        bad = await cli.request(
            17,
            {
                "topic": "bad name",
                "defaultTopic": "TBW102",
                "readQueueNums": 1,
                "writeQueueNums": 1,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
            },
        )
        assert bad.code != 0 and "illegal" in bad.remark


async def test_runtime_info_and_view_message_by_id(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        sent = await cli.send("View", b"look at me")
        table = orjson.loads((await cli.request(28)).body)["table"]
        assert table.keys() >= CLUSTER_LIST_KEYS
        assert int(table["msgPutTotalTodayNow"]) == 1 and int(table["earliestMessageTimeStamp"]) > 0
        _h, _p, phy = decode_offset_msg_id(sent.ext_fields["msgId"])
        view = await cli.request(33, {"offset": phy})
        assert view.code == 0 and decode_record(view.body).body == b"look at me"
        assert (await cli.request(33, {"offset": 10**9})).code == 1
