"""Users import what they installed, `rocketcluster`, and nothing heavy comes with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import broker.client
import rocketcluster
from broker.transport.loop import run
from tests.local_cluster import local_cluster
from tests.newuser.user_harness import python_program, user_env

HEAVY = ("kopf", "kubernetes", "aiohttp", "pyspark")


def _imported_modules(importtime_stderr: str) -> set[str]:
    # `-X importtime` lines: "import time: self | cumulative | <indent>module"
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", importtime_stderr, re.MULTILINE)
    return set(names)


def test_import_rocketcluster_loads_no_operator_spark_or_client_module() -> None:
    outcome = run(python_program("import rocketcluster", xoptions=("importtime",)))
    assert outcome.code == 0, outcome
    loaded = _imported_modules(outcome.err)
    assert "rocketcluster" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], f"import rocketcluster pulled in {heavy}"
    # the SDK itself is loaded on first use, so the operator's `import rocketcluster.model` stays light
    assert not any(m.startswith("broker") for m in loaded), sorted(m for m in loaded if m.startswith("broker"))


def test_the_operator_model_does_not_load_the_sdk() -> None:
    outcome = run(
        python_program("""
            import sys
            import rocketcluster.model
            print(sorted(m for m in sys.modules if m.startswith(("broker", "kopf", "kubernetes", "pyspark"))))
        """)
    )
    assert outcome.code == 0, outcome
    assert outcome.out.strip() == "[]"


def test_sdk_names_import_without_heavy_packages() -> None:
    outcome = run(
        python_program("""
            import sys
            from rocketcluster import (Admin, Message, Producer, PullConsumer, PushConsumer, TransactionProducer,
                                       BlockingProducer, ConsumeStatus, MessageSelector, NoRouteError)
            print(Producer.__module__, Admin.__module__)
            print(sorted(m for m in sys.modules if m.split(".")[0] in ("kopf", "kubernetes", "aiohttp", "pyspark")))
        """)
    )
    assert outcome.code == 0, outcome
    assert outcome.out.splitlines() == ["broker.client.producer broker.client.admin.client", "[]"]


def test_rocketcluster_exports_every_public_sdk_name_and_the_old_path_stays() -> None:
    assert sorted(rocketcluster.__all__) == sorted(broker.client.__all__)
    for name in rocketcluster.__all__:
        assert getattr(rocketcluster, name) is getattr(broker.client, name)
    assert set(rocketcluster.__all__) <= set(dir(rocketcluster))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = rocketcluster.Nope  # type: ignore[attr-defined]


def test_an_unknown_name_is_an_import_error() -> None:
    outcome = run(python_program("from rocketcluster import Prodcer"))
    assert outcome.code == 1
    assert "cannot import name 'Prodcer' from 'rocketcluster'" in outcome.err


def test_spark_data_source_under_the_sdk_name() -> None:
    pytest.importorskip("pyspark", reason="the Spark data source needs the `spark` extra (make test installs it)")
    outcome = run(
        python_program("""
            from rocketcluster.spark import RocketMQDataSource
            from broker.spark import RocketMQDataSource as Old
            assert RocketMQDataSource is Old
            print(RocketMQDataSource.name())
        """)
    )
    assert outcome.code == 0, outcome
    assert outcome.out.strip() == "rocketmq"


async def test_a_program_written_against_rocketcluster_sends_and_receives(tmp_path: Path) -> None:
    program = """
        import asyncio, os
        from rocketcluster import ConsumeStatus, Message, Producer, PullConsumer

        async def main() -> None:
            async with Producer("ImportNameProducer") as producer:
                sent = await producer.send(Message("ImportNameTopic", b"hello", tags="TagA"))
            consumer = PullConsumer("ImportNameGroup", auto_commit=False)
            queue = sent.message_queue
            consumer.assign([queue])
            await consumer.start()
            try:
                await consumer.seek(queue, sent.queue_offset)
                msgs = await consumer.poll(timeout=10)
            finally:
                await consumer.shutdown()
            print(sent.status.name, [m.body.decode() for m in msgs])

        asyncio.run(main())
    """

    async with local_cluster(tmp_path) as cluster:
        await cluster.create_topic("ImportNameTopic")
        outcome = await python_program(program, env=user_env(NAMESRV_ADDR=cluster.namesrv_addr))
        assert outcome.code == 0, outcome
        assert outcome.out.strip() == "SEND_OK ['hello']"
