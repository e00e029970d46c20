"""An in-process NameServer and broker on loopback TCP, with the store under a test's tmp dir.

The server, client and feature test harnesses build on this (`from tests.local_cluster import ...`:
tests/ and e2e/ are packages, and pytest puts the repo root on sys.path). pytest-asyncio is not installed:
tests run their scenario with asyncio and open a cluster with
`async with local_cluster(tmp_path, **broker_conf) as cluster:`, where the keyword arguments are
broker.conf keys (e.g. `messageDelayLevel="1s 1s"`). `restart_broker()` stops the broker and starts it
again on the same port and store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from broker.client import Admin, ClientConfig
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config

__all__ = ["SMALL_INDEX", "LocalCluster", "local_cluster", "wait_for"]

# broker.conf keys for a small IndexFile. The default (5M slots, 20M entries) reserves 420 MB of real
# disk per broker with fallocate, so that a full disk fails a put cleanly instead of with SIGBUS;
# dozens of test brokers must not each take that much.
SMALL_INDEX = {"maxHashSlotNum": "20000", "maxIndexNum": "80000"}


async def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


class LocalCluster:
    def __init__(
        self,
        root: Path,
        broker_extra: dict[str, Any],
        *,
        cluster_name: str = "TestCluster",
        broker_name: str = "broker-t",
        commit_log_file_size: int = 16 << 20,
    ) -> None:
        self.root = root
        self.broker_extra = broker_extra
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.commit_log_file_size = commit_log_file_size
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def running_broker(self) -> BrokerController:
        assert self.broker is not None
        return self.broker

    def broker_properties(self, port: int) -> dict[str, str]:
        props = {
            "brokerClusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "listenPort": str(port),
            # any free HA port: listenPort + 1 (the default) may be another socket's ephemeral port when a
            # restart reuses the listen port
            "haListenPort": "0",
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(self.root / "store"),
            "mappedFileSizeCommitLog": str(self.commit_log_file_size),
            "flushConsumerOffsetInterval": "200",
            **SMALL_INDEX,
        }
        if self.namesrv is not None:
            props["namesrvAddr"] = self.namesrv_addr
        props.update({k: str(v) for k, v in self.broker_extra.items()})
        return props

    def client_config(self, **options: Any) -> ClientConfig:
        """Fast route polling so consumers notice topics and restarts quickly in tests."""
        options.setdefault("poll_name_server_interval", 0.5)
        options.setdefault("heartbeat_broker_interval", 1.0)
        return ClientConfig(namesrv_addr=self.namesrv_addr, **options)

    async def start(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate(
                {
                    "listenPort": 0,
                    "kvConfigPath": str(self.root / "kv.json"),
                    "configStorePath": str(self.root / "namesrv.properties"),
                }
            )
        )
        await self.namesrv.start()
        await self.start_broker()

    async def start_broker(self, port: int = 0) -> BrokerController:
        self.broker = BrokerController(load_broker_config(self.broker_properties(port)))
        await self.broker.start()
        return self.broker

    async def restart_broker(self, downtime: float = 0.0) -> BrokerController:
        assert self.broker is not None
        port = self.broker.port
        await self.broker.shutdown()
        if downtime:
            await asyncio.sleep(downtime)
        return await self.start_broker(port)

    async def create_topic(self, topic: str, queues: int = 4, **options: Any) -> None:
        """Create on the broker and wait until the NameServer serves its route (registration is async)."""
        async with Admin(self.namesrv_addr) as admin:
            await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues, **options)
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
async def local_cluster(root: Path, cls: type[LocalCluster] = LocalCluster, **kwargs: Any) -> AsyncIterator[Any]:
    """Start `cls(root, broker_extra, ...)`; keyword arguments that LocalCluster does not take are broker.conf keys."""
    names = ("cluster_name", "broker_name", "commit_log_file_size")
    options = {k: kwargs.pop(k) for k in names if k in kwargs}
    cluster = cls(root, kwargs, **options)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()
