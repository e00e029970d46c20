"""What our SDK's consumers answer when a broker relays an admin's question: GET_CONSUMER_RUNNING_INFO (307) and
GET_CONSUMER_STATUS_FROM_CLIENT (221), asked over real TCP from a server the client is connected to (as a
broker asks over the consumer's own connection), with good and bad headers; and the statistics behind the
statusTable."""

from __future__ import annotations

import asyncio

import pytest

from broker.client.config import ClientConfig
from broker.client.consumer_rt_tps import SAMPLE_SECONDS, ConsumerStats, Rolling
from broker.client.consumer_running_info import RunningInfo, process_queue_info
from broker.client.instance import ClientInstance
from broker.client.message import MessageQueue
from broker.client.process_queue import ProcessQueue
from broker.protocol.bodies import MessageQueue as WireQueue
from broker.protocol.bodies import fastjson_loads
from broker.protocol.codes import RequestCode as RC
from broker.protocol.codes import ResponseCode as R
from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt
from broker.transport.connection import RemotingConnection
from broker.transport.server import RemotingServer

GROUP = "G"
MQ = MessageQueue("T", "b", 0)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_rolling_windows_cover_the_last_minute_and_hour() -> None:
    clock = Clock()
    r = Rolling(clock)
    for _ in range(120):  # 2 per second for 60 s
        clock.t += 0.5
        r.add(1)
    value, times, span = r.window(60)
    assert (value, times, span) == (120, 120, 60)
    # ten seconds later the minute starts at the snapshot taken 10 s in: the first 20 left it
    clock.t += SAMPLE_SECONDS
    assert r.window(60)[:2] == (100, 100)
    clock.t += 70
    assert r.window(60)[:2] == (0, 0) and r.window(3600)[:2] == (120, 120)


def test_consume_status_figures() -> None:
    clock = Clock()
    stats = ConsumerStats(clock)
    for _ in range(10):
        clock.t += 1
        stats.pulled("T", 0.020, 32)
        stats.consumed("T", 0.004, 30, 2)
    status = stats.status("T")
    assert round(status["pullRT"], 3) == 20.0 and round(status["consumeRT"], 3) == 4.0
    # ten pulls over the 9 s since the topic's first one
    assert status["pullTPS"] == pytest.approx(320 / 9) and status["consumeOKTPS"] == pytest.approx(300 / 9)
    assert status["consumeFailedTPS"] == pytest.approx(20 / 9) and status["consumeFailedMsgs"] == 20
    assert stats.status("Unknown") == {
        "consumeFailedMsgs": 0,
        "consumeFailedTPS": 0.0,
        "consumeOKTPS": 0.0,
        "consumeRT": 0.0,
        "pullRT": 0.0,
        "pullTPS": 0.0,
    }


def test_process_queue_info_reports_the_cached_window() -> None:
    pq = ProcessQueue()
    pq.put_messages([MessageExt(topic="T", body=b"x" * 10, queue_offset=off) for off in (5, 6, 7)])
    info = process_queue_info(pq, 5)
    assert (info["cachedMsgMinOffset"], info["cachedMsgMaxOffset"], info["cachedMsgCount"]) == (5, 7, 3)
    assert info["commitOffset"] == 5 and info["lastPullTimestamp"] > 0 and info["droped"] is False
    pq.take_messages(2)  # an orderly listener's window
    info = process_queue_info(pq, 5)
    assert (info["transactionMsgMinOffset"], info["transactionMsgMaxOffset"], info["transactionMsgCount"]) == (5, 6, 2)
    assert (info["cachedMsgMinOffset"], info["cachedMsgCount"]) == (7, 1)


def _running_info(group: str) -> RunningInfo | None:
    if group != GROUP:
        return None
    props = {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "1"}
    subs = [{"topic": "T", "subString": "*"}, {"topic": "%RETRY%G", "subString": "*"}]
    return RunningInfo(props, subs, {MQ: process_queue_info(None, 3)}, {"T": ConsumerStats().status("T")})


def _status(topic: str, group: str) -> dict[MessageQueue, int] | None:
    if group != GROUP:
        return None
    if topic != "T":
        raise LookupError(f"The Consumer Group <{group}> does not subscribe topic <{topic}> in this consumer")
    return {MQ: 3}


async def test_consumer_answers_307_and_221_and_refuses_bad_requests_clearly() -> None:
    accepted: asyncio.Future[RemotingConnection] = asyncio.get_running_loop().create_future()
    server = RemotingServer("127.0.0.1", 0)
    server.add_open_listener(lambda conn: accepted.done() or accepted.set_result(conn))
    await server.start()
    instance = ClientInstance(
        ClientConfig(namesrv_addr="127.0.0.1:9"), running_info=_running_info, consumer_status=_status
    )
    try:
        await instance.remoting.get_connection(server.address)
        conn = await asyncio.wait_for(accepted, 5)

        async def ask(code: int, ext: dict[str, str]) -> RemotingCommand:
            return await server.invoke(conn, RemotingCommand(code=code, ext_fields=ext), 5)

        r = await ask(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": instance.client_id})
        assert r.code == R.SUCCESS, r.remark
        info = fastjson_loads(r.body)
        assert info["properties"]["PROP_NAMESERVER_ADDR"] == "127.0.0.1:9;"
        assert info["properties"]["PROP_CLIENT_VERSION"] == "V5_3_3" and "jstack" not in info
        assert [s["topic"] for s in info["subscriptionSet"]] == ["%RETRY%G", "T"]  # Java's TreeSet order
        assert info["mqTable"][WireQueue("T", "b", 0)]["commitOffset"] == 3
        assert set(info["statusTable"]["T"]) == {
            "pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs"
        }  # fmt: skip
        with_stacks = await ask(
            RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": "x", "jstackEnable": "true"}
        )
        assert "MainThread" in fastjson_loads(with_stacks.body)["jstack"]

        r = await ask(RC.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": GROUP})
        assert r.code == R.SUCCESS and fastjson_loads(r.body)["messageQueueTable"] == {WireQueue("T", "b", 0): 3}

        bad = [
            (RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "Other", "clientId": "c"}, "<Other> not exist"),
            (RC.GET_CONSUMER_RUNNING_INFO, {"clientId": "c"}, "consumerGroup"),
            (RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP}, "clientId"),
            (RC.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": "Other"}, "<Other> not exist"),
            (RC.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "U", "group": GROUP}, "does not subscribe topic <U>"),
            (RC.GET_CONSUMER_STATUS_FROM_CLIENT, {"group": GROUP}, "topic"),
        ]
        for code, ext, says in bad:
            r = await ask(code, ext)
            assert r.code == R.SYSTEM_ERROR and says in (r.remark or ""), (code, ext, r.code, r.remark)
        # the connection still answers
        r = await ask(RC.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": GROUP})
        assert r.code == R.SUCCESS
    finally:
        await instance.close()
        await server.shutdown(0.1)
