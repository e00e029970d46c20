"""The admin inspection and maintenance codes: the bodies mqadmin reads, and bad input.

Each request goes over a real connection to a real broker (server_harness.cluster). The Java mqadmin
runs against them in tests/interop/test_java_mqadmin.py; here every code also gets its bad input
(missing header fields, unknown groups and topics), answered with a clear code, never an exception.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from broker.config.properties import load_properties
from broker.protocol.bodies import MessageQueue, fastjson_loads
from broker.protocol.codes import RequestCode as RC
from broker.protocol.codes import ResponseCode
from broker.protocol.codes import ResponseCode as R
from tests.server.server_harness import cluster


async def test_progress_codes_report_offsets_and_lag(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        for i in range(5):
            assert (await cli.send("Lag", b"m%d" % i, queue_id=i % 2)).code == 0
        assert (await cli.heartbeat("cid-1", "G1", ["Lag"])).code == 0
        await cli.request(
            RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G1", "topic": "Lag", "queueId": 0, "commitOffset": 2}
        )

        stats = fastjson_loads((await cli.request(RC.GET_TOPIC_STATS_INFO, {"topic": "Lag"})).body)
        q0 = stats["offsetTable"][MessageQueue("Lag", "broker-t", 0)]
        assert (q0["minOffset"], q0["maxOffset"]) == (0, 3) and q0["lastUpdateTimestamp"] > 0
        assert stats["topicPutTps"] > 0  # five messages within the last minute

        r = await cli.request(RC.GET_CONSUME_STATS, {"consumerGroup": "G1", "topic": "Lag"})
        table = fastjson_loads(r.body)["offsetTable"]
        lag = {mq.queue_id: w["brokerOffset"] - w["consumerOffset"] for mq, w in table.items()}
        assert lag == {0: 1, 1: 2, 2: 0, 3: 0}, lag

        conns = orjson.loads((await cli.request(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G1"})).body)
        assert [x["clientId"] for x in conns["connectionSet"]] == ["cid-1"]
        assert conns["consumeType"] == "CONSUME_PASSIVELY" and "Lag" in conns["subscriptionTable"]

        who = orjson.loads((await cli.request(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Lag"})).body)
        assert who["groupList"] == ["G1"]

        whole = fastjson_loads((await cli.request(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})).body)
        assert whole["totalDiff"] == 3 and whole["brokerAddr"] == c.running_broker.addr

        day = orjson.loads(
            (await cli.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Lag"})).body
        )
        assert day["statsDay"]["sum"] == 5 and day["statsMinute"]["sum"] == 5

        assert (
            await cli.request(RC.CLONE_GROUP_OFFSET, {"srcGroup": "G1", "destGroup": "G2", "offline": "true"})
        ).code == 0
        copy = fastjson_loads((await cli.request(RC.GET_CONSUME_STATS, {"consumerGroup": "G2"})).body)["offsetTable"]
        assert copy[MessageQueue("Lag", "broker-t", 0)]["consumerOffset"] == 2

        spans = orjson.loads((await cli.request(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "Lag", "group": "G1"})).body)
        assert len(spans["consumeTimeSpanSet"]) == 4

        tc = orjson.loads((await cli.request(RC.GET_TOPIC_CONFIG, {"topic": "Lag", "lo": "true"})).body)
        assert tc["topicName"] == "Lag" and tc["readQueueNums"] == 4

        # 307 goes to the consumer itself; this test client does not know the code and says so.
        r = await cli.request(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G1", "clientId": "cid-1"})
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, r.remark


async def test_bad_admin_requests_get_clear_codes(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        cases = [
            (RC.GET_TOPIC_STATS_INFO, {}, R.SYSTEM_ERROR, "topic"),
            (RC.GET_TOPIC_STATS_INFO, {"topic": "Nope"}, R.TOPIC_NOT_EXIST, "Nope"),
            (RC.GET_CONSUME_STATS, {}, R.SYSTEM_ERROR, "consumerGroup"),
            (
                RC.GET_CONSUME_STATS,
                {"consumerGroup": "NoGroup"},
                R.SUBSCRIPTION_GROUP_NOT_EXIST,
                "NoGroup",
            ),
            (
                RC.GET_CONSUMER_CONNECTION_LIST,
                {"consumerGroup": "NoGroup"},
                R.CONSUMER_NOT_ONLINE,
                "NoGroup",
            ),
            (RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "NoPG"}, R.SYSTEM_ERROR, "NoPG"),
            (RC.GET_PRODUCER_CONNECTION_LIST, {}, R.SYSTEM_ERROR, "producerGroup"),
            (RC.GET_BROKER_CONSUME_STATS, {}, R.SYSTEM_ERROR, "isOrder"),
            (RC.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "g"}, R.TOPIC_NOT_EXIST, "Nope"),
            (RC.CLONE_GROUP_OFFSET, {"srcGroup": "a"}, R.SYSTEM_ERROR, "destGroup"),
            (
                RC.VIEW_BROKER_STATS_DATA,
                {"statsName": "X", "statsKey": "y"},
                R.SYSTEM_ERROR,
                "not exist",
            ),
            (RC.GET_TOPIC_CONFIG, {"topic": "Nope"}, R.TOPIC_NOT_EXIST, "Nope"),
            (
                RC.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": "G", "clientId": "c"},
                R.CONSUMER_NOT_ONLINE,
                "G",
            ),
            (RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "t", "group": "G"}, R.SYSTEM_ERROR, "G"),
            (
                RC.DELETE_SUBSCRIPTIONGROUP,
                {"groupName": "NoGroup"},
                R.SUBSCRIPTION_GROUP_NOT_EXIST,
                "NoGroup",
            ),
            (RC.DELETE_SUBSCRIPTIONGROUP, {}, R.SYSTEM_ERROR, "groupName"),
        ]
        for code, ext, want, words in cases:
            r = await cli.request(code, ext)
            assert (r.code, words in (r.remark or "")) == (want, True), (code, ext, r.code, r.remark)
        for body, want in [
            (b"noSuchKey=1", ResponseCode.INVALID_PARAMETER),
            (b"brokerPermission=99", ResponseCode.INVALID_PARAMETER),
            (b"configBlackList=x", ResponseCode.NO_PERMISSION),
            (b"", ResponseCode.INVALID_PARAMETER),
            (b"\xff\xfe", ResponseCode.SYSTEM_ERROR),
        ]:
            r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=body)
            assert r.code == want, (body, r.code, r.remark)
        # The connection is still fine after all that.
        assert (await cli.send("StillFine")).code == 0


async def test_update_broker_config_applies_live_and_persists(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        conf = tmp_path / "broker.conf"
        conf.write_text("# mine\nbrokerName=broker-t\n")
        c.running_broker.loaded.source = conf
        cli = await c.client()
        r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\nlistenPort=1234\n")
        assert r.code == 0 and "listenPort" in (r.remark or ""), r.remark
        assert c.running_broker.config.auto_create_topic_enable is False
        assert c.running_broker.config.listen_port != 1234  # takes effect at the next start
        assert load_properties(conf) == {
            "brokerName": "broker-t",
            "autoCreateTopicEnable": "false",
            "listenPort": "1234",
        }
        assert conf.read_text().startswith("# mine\n")
        text = (await cli.request(RC.GET_BROKER_CONFIG)).body.decode()
        assert "autoCreateTopicEnable=false" in text
        # autoCreateTopicEnable=false now refuses a send to an unknown topic
        assert (await cli.send("NeverCreated")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_update_namesrv_config(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        ns = await c.namesrv_client()
        r = await ns.request(RC.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false\n")
        assert r.code == 0, r.remark
        text = (await ns.request(RC.GET_NAMESRV_CONFIG)).body.decode()
        assert "enableTopicList=false" in text
        assert (await ns.request(RC.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/x")).code == ResponseCode.NO_PERMISSION
        bad = await ns.request(RC.UPDATE_NAMESRV_CONFIG, body=b"listenPort=abc")
        assert bad.code == ResponseCode.INVALID_PARAMETER and "listenPort" in (bad.remark or "")
