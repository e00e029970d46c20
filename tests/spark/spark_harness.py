"""Harness of the Spark data source tests: a live NameServer + broker, and Spark sessions.

Spark's driver calls are blocking, so the cluster runs in-process on its own event loop in a
background thread (`ThreadedCluster`); tests call `cluster.call(coro)` to run client code there.
Spark executors (Python workers) reach the broker over loopback TCP like any remote client.
`spark_session()` builds the local[2] session the tests share; `spark_conf()` is also used by the
subprocess driver script (stream_job.py) so both run with the same settings.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from broker.client import (
    Admin,
    ClientConfig,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendResult,
)
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import new_event_loop
from tests.local_cluster import SMALL_INDEX

__all__ = ["ThreadedCluster", "spark_conf", "spark_session"]

T = TypeVar("T")


class ThreadedCluster:
    """NameServer + one broker (`broker_name`) on a private loop in a daemon thread."""

    def __init__(self, root: Path, broker_name: str = "broker-s", **broker_extra: Any) -> None:
        self.root = root
        self.broker_name = broker_name
        self.broker_extra = broker_extra
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="spark-test-cluster", daemon=True)
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None
        self._producer: Producer | None = None

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return f"127.0.0.1:{self.namesrv.port}"

    def start(self) -> ThreadedCluster:
        self._thread.start()
        self.call(self._start())
        return self

    async def _start(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": str(self.root / "kv.json")})
        )
        await self.namesrv.start()
        props = {
            "brokerClusterName": "SparkTestCluster",
            "brokerName": self.broker_name,
            "listenPort": "0",
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(self.root / "store"),
            "mappedFileSizeCommitLog": str(64 << 20),
            **SMALL_INDEX,
            "namesrvAddr": self.namesrv_addr,
        }
        props.update({k: str(v) for k, v in self.broker_extra.items()})
        self.broker = BrokerController(load_broker_config(props))
        await self.broker.start()

    def stop(self) -> None:
        async def stop() -> None:
            if self._producer is not None:
                await self._producer.shutdown()
            if self.broker is not None:
                await self.broker.shutdown()
            if self.namesrv is not None:
                await self.namesrv.shutdown()

        try:
            self.call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        async def create() -> None:
            async with Admin(self.namesrv_addr) as admin:
                await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
                for _ in range(200):
                    if topic in await admin.topic_list():
                        return
                    await asyncio.sleep(0.05)
            raise AssertionError(f"topic {topic} never reached the NameServer")

        self.call(create())

    def send(self, msgs: Sequence[Message], window: int = 128) -> list[SendResult]:
        """Send with `window` in flight; results in input order."""

        async def send() -> list[SendResult]:
            if self._producer is None:
                self._producer = Producer("spark-test-producer", self.namesrv_addr)
                await self._producer.start()
            slots = asyncio.Semaphore(window)

            async def one(msg: Message) -> SendResult:
                async with slots:
                    assert self._producer is not None
                    return await self._producer.send(msg)

            return list(await asyncio.gather(*(one(m) for m in msgs)))

        return self.call(send())

    def hold_retention(self) -> None:
        """Stop the store's periodic clean pass, so only `expire_commit_log()` deletes files."""
        assert self.broker is not None
        clean = self.broker.store.clean_service
        assert clean is not None
        self.call(clean.close())

    def expire_commit_log(self) -> int:
        """Run the store's retention now, as `mqadmin deleteExpiredCommitLog` does: with
        fileReservedTime=0 every CommitLog file but the active one goes. Returns files deleted."""
        assert self.broker is not None
        clean = self.broker.store.clean_service
        assert clean is not None

        async def expire() -> int:
            clean.manual_delete = True
            return await clean.run_once()

        return self.call(expire())

    def push_consume(self, topic: str, group: str, count: int, timeout: float = 60.0) -> list[MessageExt]:
        """Messages a push consumer (from the first offset) receives until it has `count`, plus
        half a second for anything extra (a duplicate) to show up."""

        async def consume() -> list[MessageExt]:
            seen: list[MessageExt] = []

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                seen.extend(msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer(
                group,
                client_config=ClientConfig(namesrv_addr=self.namesrv_addr, instance_name=f"push-{group}"),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            consumer.register_listener(listener)
            consumer.subscribe(topic, "*")
            await consumer.start()
            try:
                deadline = self.loop.time() + timeout
                while len(seen) < count and self.loop.time() < deadline:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)
            finally:
                await consumer.shutdown()
            return seen

        return self.call(consume(), timeout + 30)

    def queue_offsets(self, topic: str, group: str | None = None) -> dict[tuple[int, str], tuple[int, int]]:
        """(queue id, broker) -> (broker max offset, `group`'s committed offset or -1)."""

        async def progress() -> dict[tuple[int, str], tuple[int, int]]:
            async with Admin(self.namesrv_addr) as admin:
                rows = await admin.consumer_progress(group or "no-such-group", topic)
            return {(r.mq.queue_id, r.mq.broker_name): (r.broker_offset, r.consumer_offset) for r in rows}

        return self.call(progress())


def spark_conf(tmp: Path) -> dict[str, str]:
    """local[2] with little memory, no UI, scratch space under `tmp` (hermetic and quick to start)."""
    return {
        "spark.master": "local[2]",
        # Loopback only: without these the driver binds to the host's first interface address.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": str(tmp),
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={tmp}",
        "spark.sql.streaming.stopTimeout": "30s",
    }


def spark_session(tmp: Path) -> Any:
    # Workers must run this interpreter: it has pyarrow and this package.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from broker.spark import RocketMQDataSource

    builder = SparkSession.builder.appName("rocketmq-tests")
    for key, value in spark_conf(tmp).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    return spark
