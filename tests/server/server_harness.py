"""Harness for the broker tests: a real NameServer and broker on loopback TCP with a store in a tmp dir,
and a minimal test client built directly on the transport (the SDK is tested elsewhere).

pytest-asyncio is not installed: each test runs its scenario with `run()` (uvloop), and `cluster()`
is an async context manager that starts and stops the real parts. Test modules import it as
`tests.server.server_harness`; conftest.py only holds fixtures.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt, decode_records
from broker.protocol.properties import encode_properties
from broker.transport.client import connect
from broker.transport.connection import RemotingConnection
from tests.local_cluster import LocalCluster, local_cluster


class Cluster(LocalCluster):
    """The shared local cluster (tests/local_cluster.py) plus raw test clients to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clients: list[TestClient] = []

    async def client(self) -> TestClient:
        c = TestClient(await connect(self.running_broker.addr))
        self.clients.append(c)
        return c

    async def namesrv_client(self) -> TestClient:
        c = TestClient(await connect(self.namesrv_addr))
        self.clients.append(c)
        return c

    async def stop(self) -> None:
        for c in self.clients:
            c.conn.close()
        await super().stop()


@contextlib.asynccontextmanager
async def cluster(root: Path, **broker_extra: Any) -> AsyncIterator[Cluster]:
    async with local_cluster(root, cls=Cluster, commit_log_file_size=4 << 20, **broker_extra) as c:
        yield c


class TestClient:
    """Raw requests over one real connection, with helpers for the common ones."""

    __test__ = False  # not a test class

    def __init__(self, conn: RemotingConnection) -> None:
        self.conn = conn

    async def request(
        self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", timeout: float = 5.0, version: int = 479
    ) -> RemotingCommand:
        cmd = RemotingCommand(
            code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body, version=version
        )
        return await self.conn.invoke(cmd, timeout)

    async def send(
        self,
        topic: str,
        body: bytes = b"hello",
        *,
        queue_id: int = 0,
        props: dict[str, str] | None = None,
        code: int = 310,
        properties_text: str | None = None,
        producer_group: str = "PG",
    ) -> RemotingCommand:
        text = properties_text if properties_text is not None else encode_properties(props or {})
        fields: dict[str, Any] = {
            "producerGroup": producer_group,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue_id,
            "sysFlag": 0,
            "bornTimestamp": int(time.time() * 1000),
            "flag": 0,
            "properties": text,
            "reconsumeTimes": 0,
        }
        if code in (310, 320):
            short = dict(zip("abcdefghij", fields.values(), strict=True))
            if code == 320:
                short["m"] = "true"
            fields = short
        return await self.request(code, fields, body)

    async def pull(
        self,
        topic: str,
        offset: int,
        *,
        group: str = "CG",
        queue_id: int = 0,
        suspend_ms: int = 0,
        sub: str = "*",
        max_nums: int = 32,
        commit_offset: int | None = None,
        timeout: float = 30.0,
    ) -> RemotingCommand:
        sys_flag = 0x4 | (0x2 if suspend_ms else 0) | (0x1 if commit_offset is not None else 0)
        return await self.request(
            11,
            {
                "consumerGroup": group,
                "topic": topic,
                "queueId": queue_id,
                "queueOffset": offset,
                "maxMsgNums": max_nums,
                "sysFlag": sys_flag,
                "commitOffset": commit_offset or 0,
                "suspendTimeoutMillis": suspend_ms,
                "subscription": sub,
                "subVersion": 0,
            },
            timeout=timeout,
        )

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
