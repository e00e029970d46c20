"""Harness for the broker tests: a real NameServer and broker on loopback TCP with a store in a tmp dir,
and a minimal test client built directly on the transport (the SDK is tested elsewhere).

pytest-asyncio is not installed: each test runs its scenario with `run()` (uvloop), and `cluster()`
is an async context manager that starts and stops the real parts. Test modules import this file by
name (pytest puts tests/server on sys.path); conftest.py only holds fixtures.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt, decode_records
from broker.protocol.properties import encode_properties
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.client import connect
from broker.transport.connection import RemotingConnection


def broker_properties(root: Path, namesrv_port: int | None, **extra: Any) -> dict[str, str]:
    props = {
        "brokerClusterName": "TestCluster",
        "brokerName": "broker-t",
        "listenPort": "0",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": str(4 << 20),
        "flushConsumerOffsetInterval": "200",
    }
    if namesrv_port is not None:
        props["namesrvAddr"] = f"127.0.0.1:{namesrv_port}"
    props.update({k: str(v) for k, v in extra.items()})
    return props


class Cluster:
    """A running NameServer + broker; `restart_broker()` stops and starts the broker on the same store."""

    def __init__(self, root: Path, broker_extra: dict[str, Any]) -> None:
        self.root = root
        self.broker_extra = broker_extra
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None
        self.clients: list[TestClient] = []

    async def start(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": str(self.root / "kv.json")})
        )
        await self.namesrv.start()
        await self.start_broker()

    async def start_broker(self, port: int = 0) -> BrokerController:
        assert self.namesrv is not None
        props = broker_properties(self.root / "store", self.namesrv.port, **self.broker_extra)
        props["listenPort"] = str(port)
        self.broker = BrokerController(load_broker_config(props))
        await self.broker.start()
        return self.broker

    async def restart_broker(self) -> BrokerController:
        assert self.broker is not None
        port = self.broker.port
        await self.broker.shutdown()
        return await self.start_broker(port)

    async def client(self) -> TestClient:
        assert self.broker is not None
        c = TestClient(await connect(self.broker.addr))
        self.clients.append(c)
        return c

    async def namesrv_client(self) -> TestClient:
        assert self.namesrv is not None
        c = TestClient(await connect(f"127.0.0.1:{self.namesrv.port}"))
        self.clients.append(c)
        return c

    async def stop(self) -> None:
        for c in self.clients:
            c.conn.close()
        if self.broker is not None:
            await self.broker.shutdown()
        if self.namesrv is not None:
            await self.namesrv.shutdown()


@contextlib.asynccontextmanager
async def cluster(root: Path, **broker_extra: Any) -> AsyncIterator[Cluster]:
    c = Cluster(root, broker_extra)
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


class TestClient:
    """Raw requests over one real connection, with helpers for the common ones."""

    __test__ = False  # not a test class

    def __init__(self, conn: RemotingConnection) -> None:
        self.conn = conn

    async def request(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", timeout: float = 5.0,
                      version: int = 479) -> RemotingCommand:
        cmd = RemotingCommand(code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body,
                              version=version)
        return await self.conn.invoke(cmd, timeout)

    async def send(self, topic: str, body: bytes = b"hello", *, queue_id: int = 0, props: dict[str, str] | None = None,
                   code: int = 310, properties_text: str | None = None, producer_group: str = "PG") -> RemotingCommand:
        text = properties_text if properties_text is not None else encode_properties(props or {})
        fields: dict[str, Any] = {
            "producerGroup": producer_group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
            "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "properties": text, "reconsumeTimes": 0,
        }
        if code in (310, 320):
            short = dict(zip("abcdefghij", fields.values(), strict=True))
            if code == 320:
                short["m"] = "true"
            fields = short
        return await self.request(code, fields, body)

    async def pull(self, topic: str, offset: int, *, group: str = "CG", queue_id: int = 0, suspend_ms: int = 0,
                   sub: str = "*", max_nums: int = 32, commit_offset: int | None = None,
                   timeout: float = 30.0) -> RemotingCommand:
        sys_flag = 0x4 | (0x2 if suspend_ms else 0) | (0x1 if commit_offset is not None else 0)
        return await self.request(11, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
            "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": commit_offset or 0,
            "suspendTimeoutMillis": suspend_ms, "subscription": sub, "subVersion": 0,
        }, timeout=timeout)

    async def heartbeat(
        self, client_id: str, group: str, topics: list[str], *, cpp_enums: bool = False
    ) -> RemotingCommand:
        consumer = {
            "groupName": group,
            "consumeType": 1 if cpp_enums else "CONSUME_PASSIVELY",
            "messageModel": 1 if cpp_enums else "CLUSTERING",
            "consumeFromWhere": 0 if cpp_enums else "CONSUME_FROM_LAST_OFFSET",
            "unitMode": False,
            "subscriptionDataSet": [
                {"topic": t, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1} for t in topics
            ],
        }
        body = orjson.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [consumer]})
        return await self.request(34, body=body)


def messages(resp: RemotingCommand) -> list[MessageExt]:
    return list(decode_records(resp.body))
