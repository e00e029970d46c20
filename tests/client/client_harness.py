"""Harness of the client SDK tests: a real NameServer and broker, in-process, on loopback TCP.

pytest-asyncio is not installed, so live tests run their scenario with `run()` and open the
cluster with `async with live_cluster(tmp_path) as cluster:` (tests import this module by name;
conftest.py holds only fixtures). The broker keeps its store under
the test's tmp dir; `restart_broker()` stops it and starts it again on the same port and store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from broker.client import Admin
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config

__all__ = ["LiveCluster", "live_cluster"]


class LiveCluster:
    def __init__(self, root: Path, broker_extra: dict[str, Any]) -> None:
        self.root = root
        self.broker_extra = broker_extra
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return f"127.0.0.1:{self.namesrv.port}"

    async def start(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": str(self.root / "kv.json")})
        )
        await self.namesrv.start()
        await self.start_broker()

    async def start_broker(self, port: int = 0) -> BrokerController:
        assert self.namesrv is not None
        props = {
            "brokerClusterName": "ClientTestCluster",
            "brokerName": "broker-c",
            "listenPort": str(port),
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(self.root / "store"),
            "mappedFileSizeCommitLog": str(16 << 20),
            "namesrvAddr": self.namesrv_addr,
        }
        props.update({k: str(v) for k, v in self.broker_extra.items()})
        self.broker = BrokerController(load_broker_config(props))
        await self.broker.start()
        return self.broker

    async def restart_broker(self) -> BrokerController:
        assert self.broker is not None
        port = self.broker.port
        await self.broker.shutdown()
        return await self.start_broker(port)

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create on the broker and wait until the NameServer serves its route (registration is async)."""
        async with Admin(self.namesrv_addr) as admin:
            await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
            for _ in range(200):
                if topic in await admin.topic_list():
                    return
                await asyncio.sleep(0.05)
        raise AssertionError(f"topic {topic} never reached the NameServer")

    async def stop(self) -> None:
        if self.broker is not None:
            await self.broker.shutdown()
        if self.namesrv is not None:
            await self.namesrv.shutdown()


@contextlib.asynccontextmanager
async def live_cluster(root: Path, **broker_extra: Any) -> AsyncIterator[LiveCluster]:
    cluster = LiveCluster(root, broker_extra)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()
