"""Heartbeats, consumer lists, NOTIFY_CONSUMER_IDS_CHANGED, retry topics in routes, and queue locks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import connect
from broker.transport.dispatcher import Dispatcher
from tests.server.server_harness import TestClient, cluster


async def test_heartbeat_registers_group_retry_topic_and_notifies(tmp_path: Path) -> None:
    notified: list[str] = []

    def on_notify(conn: object, cmd: RemotingCommand) -> None:
        notified.append(cmd.ext_fields["consumerGroup"])

    async with cluster(tmp_path) as c:
        d = Dispatcher()
        d.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        first = TestClient(await connect(c.broker.addr, dispatcher=d))
        c.clients.append(first)
        r = await first.heartbeat("cid-1", "CG1", ["T1"])
        assert r.code == 0
        assert c.broker.topics.get("%RETRY%CG1") is not None
        await asyncio.sleep(0.1)  # the re-registration after the topic change
        ns = await c.namesrv_client()
        route = await ns.request(105, {"topic": "%RETRY%CG1"})
        assert route.code == 0 and b"broker-t" in route.body
        # C++ clients send the enums as integers
        second = await c.client()
        assert (await second.heartbeat("cid-2", "CG1", ["T1"], cpp_enums=True)).code == 0
        ids = orjson.loads((await first.request(38, {"consumerGroup": "CG1"})).body)["consumerIdList"]
        assert sorted(ids) == ["cid-1", "cid-2"]
        await asyncio.sleep(0.1)
        assert notified.count("CG1") >= 2  # own join, then cid-2 joining
        before = len(notified)
        second.conn.close()
        for _ in range(50):
            if len(notified) > before:
                break
            await asyncio.sleep(0.02)
        assert len(notified) > before, "closing a channel must notify the rest of the group"
        ids = orjson.loads((await first.request(38, {"consumerGroup": "CG1"})).body)["consumerIdList"]
        assert ids == ["cid-1"]
        assert (await first.request(35, {"clientID": "cid-1", "consumerGroup": "CG1"})).code == 0
        none = await first.request(38, {"consumerGroup": "CG1"})
        assert none.code == 1 and "no consumer" in none.remark


async def test_lock_batch_grants_to_one_client_until_unlocked(tmp_path: Path) -> None:
    def body(client: str) -> bytes:
        return orjson.dumps(
            {
                "consumerGroup": "OG",
                "clientId": client,
                "onlyThisBroker": False,
                "mqSet": [{"brokerName": "broker-t", "queueId": q, "topic": "T"} for q in (0, 1)],
            }
        )

    async with cluster(tmp_path) as c:
        cli = await c.client()
        a = orjson.loads((await cli.request(41, body=body("A"))).body)["lockOKMQSet"]
        b = orjson.loads((await cli.request(41, body=body("B"))).body)["lockOKMQSet"]
        assert len(a) == 2 and b == []
        assert (await cli.request(42, body=body("A"))).code == 0
        b = orjson.loads((await cli.request(41, body=body("B"))).body)["lockOKMQSet"]
        assert len(b) == 2
