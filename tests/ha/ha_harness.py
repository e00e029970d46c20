"""Harness for the in-process HA tests: a NameServer, a master and a slave BrokerController on loopback,
one event loop, small CommitLog files (rolling is exercised), short HA intervals.

The real-process fault tests use netns_harness.py instead. Test modules import it as `tests.ha.ha_harness`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from tests.local_cluster import SMALL_INDEX

FILE_SIZE = 1 << 20  # 1 MiB CommitLog files: a few hundred KiB of messages cross files


def ha_properties(root: Path, namesrv_port: int, broker_id: int, role: str, **extra: Any) -> dict[str, str]:
    props = {
        "brokerClusterName": "HACluster",
        "brokerName": "broker-ha",
        "brokerId": str(broker_id),
        "brokerRole": role,
        "listenPort": "0",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": str(FILE_SIZE),
        **SMALL_INDEX,
        "namesrvAddr": f"127.0.0.1:{namesrv_port}",
        "haSendHeartbeatInterval": "500",
        "haHousekeepingInterval": "3000",
        "syncFlushTimeout": "1500",
        "slaveSyncInterval": "300",
        "flushConsumerOffsetInterval": "200",
        "diskMaxUsedSpaceRatio": "95",  # shared CI disks are often fuller than the 75% default
    }
    props.update({k: str(v) for k, v in extra.items()})
    return props


class Pair:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.namesrv: NamesrvController | None = None
        self.master: BrokerController | None = None
        self.slave: BrokerController | None = None

    async def start_namesrv(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": str(self.root / "kv.json")})
        )
        await self.namesrv.start()

    async def start_master(self, role: str = "SYNC_MASTER", store: str = "master", **extra: Any) -> BrokerController:
        assert self.namesrv is not None
        props = ha_properties(self.root / store, self.namesrv.port, 0, role, **extra)
        self.master = BrokerController(load_broker_config(props))
        await self.master.start()
        return self.master

    async def start_slave(self, store: str = "slave", **extra: Any) -> BrokerController:
        assert self.namesrv is not None
        props = ha_properties(self.root / store, self.namesrv.port, 1, "SLAVE", **extra)
        self.slave = BrokerController(load_broker_config(props))
        await self.slave.start()
        return self.slave

    async def stop(self) -> None:
        for b in (self.slave, self.master):
            if b is not None:
                await b.shutdown()
        if self.namesrv is not None:
            await self.namesrv.shutdown()


@contextlib.asynccontextmanager
async def pair(root: Path, role: str = "SYNC_MASTER", **extra: Any) -> AsyncIterator[Pair]:
    p = Pair(root)
    await p.start_namesrv()
    await p.start_master(role, **extra)
    await p.start_slave(**extra)
    try:
        yield p
    finally:
        await p.stop()


async def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


def commit_log_bytes(broker: BrokerController, start: int, end: int) -> bytes:
    """The CommitLog's bytes [start, end), read through the store's HA view (file by file)."""
    out = bytearray()
    offset = start
    while offset < end:
        view = broker.store.get_commit_log_data(offset, end - offset)
        assert view is not None and len(view) > 0, f"no CommitLog data at {offset}"
        out += view
        offset += len(view)
        view.release()
    return bytes(out)
