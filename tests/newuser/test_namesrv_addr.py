"""The SDK finds its NameServer as RocketMQ's clients do, and says so when it cannot.

Order: the explicit argument, then the `rocketmq.namesrv.addr` property (`python -X rocketmq.namesrv.addr=...`,
Python's `java -D`), then $NAMESRV_ADDR. Nothing set is an error naming both, from every entry point.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client.config import resolve_namesrv_addr
from broker.client.errors import NoNameServerError
from broker.spark.options import OptionError, source_options
from broker.transport.loop import run
from tests.local_cluster import local_cluster
from tests.newuser.user_harness import mqadmin, python_program, user_env

PROPERTY = "rocketmq.namesrv.addr"


@pytest.mark.parametrize(
    ("explicit", "xoptions", "environ", "expected"),
    [
        ("a:1", {PROPERTY: "b:2"}, {"NAMESRV_ADDR": "c:3"}, "a:1"),
        (None, {PROPERTY: "b:2"}, {"NAMESRV_ADDR": "c:3"}, "b:2"),
        (None, {}, {"NAMESRV_ADDR": "c:3;d:4"}, "c:3;d:4"),
        ("", {PROPERTY: "  "}, {"NAMESRV_ADDR": "c:3"}, "c:3"),
        (None, {PROPERTY: True}, {"NAMESRV_ADDR": "c:3"}, "c:3"),  # `-X rocketmq.namesrv.addr` without a value
    ],
)
def test_resolution_order(
    explicit: str | None, xoptions: dict[str, str | bool], environ: dict[str, str], expected: str
) -> None:
    assert resolve_namesrv_addr(explicit, xoptions=xoptions, environ=environ) == expected


@pytest.mark.parametrize("environ", [{}, {"NAMESRV_ADDR": ""}, {"NAMESRV_ADDR": " "}])
def test_nothing_set_names_both_ways(environ: dict[str, str]) -> None:
    with pytest.raises(NoNameServerError) as info:
        resolve_namesrv_addr(None, xoptions={}, environ=environ)
    assert "NAMESRV_ADDR" in str(info.value) and PROPERTY in str(info.value)


SEND_AND_NAME_THE_BROKER = """
    import asyncio
    from rocketcluster import Message, Producer

    async def main() -> None:
        async with Producer("EnvProducer") as producer:
            result = await producer.send(Message("EnvTopic", b"which cluster?"))
        print(result.message_queue.broker_name)

    asyncio.run(main())
"""


async def test_a_producer_sends_to_the_cluster_named_by_the_environment_or_property(tmp_path: Path) -> None:
    """Two clusters: the one NAMESRV_ADDR (or the property) names gets the message."""

    async with (
        local_cluster(tmp_path / "a", broker_name="broker-first", autoCreateTopicEnable="true") as first,
        local_cluster(tmp_path / "b", broker_name="broker-second", autoCreateTopicEnable="true") as second,
    ):
        by_env = await python_program(SEND_AND_NAME_THE_BROKER, env=user_env(NAMESRV_ADDR=second.namesrv_addr))
        assert by_env.code == 0, by_env
        assert by_env.out.strip() == "broker-second"

        by_property = await python_program(
            SEND_AND_NAME_THE_BROKER,
            env=user_env(NAMESRV_ADDR=second.namesrv_addr),
            xoptions=(f"{PROPERTY}={first.namesrv_addr}",),
        )
        assert by_property.code == 0, by_property
        assert by_property.out.strip() == "broker-first"


EVERY_ENTRY_POINT = """
    import asyncio
    from rocketcluster import (Admin, BlockingAdmin, BlockingProducer, BlockingPullConsumer, BlockingPushConsumer,
                               NoNameServerError, Producer, PullConsumer, PushConsumer, TransactionProducer)

    async def main() -> None:
        for make in (lambda: Producer("G"), lambda: PushConsumer("G"), lambda: PullConsumer("G"),
                     lambda: TransactionProducer("G", checker=lambda msg: None), lambda: Admin(),
                     lambda: BlockingProducer("G"), lambda: BlockingPushConsumer("G"),
                     lambda: BlockingPullConsumer("G"), lambda: BlockingAdmin()):
            try:
                make()
            except NoNameServerError as exc:
                print("refused:", exc)
            else:
                print("built without a NameServer address")

    asyncio.run(main())
"""


def test_every_entry_point_refuses_to_guess() -> None:
    outcome = run(python_program(EVERY_ENTRY_POINT))
    assert outcome.code == 0, outcome
    lines = outcome.out.splitlines()
    assert len(lines) == 9, outcome
    for line in lines:
        assert line.startswith("refused: no NameServer address"), line
        assert "NAMESRV_ADDR" in line and PROPERTY in line


def test_an_unstarted_client_raises_the_error_in_the_users_program() -> None:
    outcome = run(python_program("from rocketcluster import Producer\nProducer('G')"))
    assert outcome.code == 1
    last = outcome.err.strip().splitlines()[-1]
    assert last.startswith("broker.client.errors.NoNameServerError: no NameServer address"), outcome
    assert "NAMESRV_ADDR" in last and PROPERTY in last


def test_mqadmin_without_an_address() -> None:
    outcome = run(mqadmin("clusterList"))
    assert outcome.code == 2, outcome
    assert "no NameServer address: pass -n host:9876 or set NAMESRV_ADDR" in outcome.err


async def test_mqadmin_takes_the_environment(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, broker_name="broker-env") as cluster:
        outcome = await mqadmin("clusterList", env=user_env(NAMESRV_ADDR=cluster.namesrv_addr))
        assert outcome.code == 0, outcome
        assert "broker-env" in outcome.out


def test_spark_source_default_is_the_environment() -> None:
    assert source_options({"topic": "T"}, streaming=False, env={"NAMESRV_ADDR": "ns:9876"}).namesrv == "ns:9876"
    explicit = source_options({"topic": "T", "nameServer": "x:1"}, streaming=False, env={"NAMESRV_ADDR": "ns:9876"})
    assert explicit.namesrv == "x:1"
    with pytest.raises(OptionError, match="option nameServer is required \\(or set the NAMESRV_ADDR"):
        source_options({"topic": "T"}, streaming=False, env={})
