"""The /metrics endpoint and the metrics keys: bad input gets a clear answer or a clear error.

A metrics port in use fails the broker's and the NameServer's start with a message naming
metricsPromExporterPort; malformed keys fail the config load naming the key; requests other than a
scrape get a 4xx and the endpoint keeps serving.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from broker.client import Admin
from broker.config.errors import ConfigError
from broker.metrics.http import MetricsPortError
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run
from tests.local_cluster import SMALL_INDEX, local_cluster
from tests.metrics.metrics_scrape import Scrape, http_get, scrape

PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"}


def _listening() -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def _broker_conf(root: Path, **extra: str) -> dict[str, str]:
    return {
        "brokerName": "broker-p",
        "listenPort": "0",
        "haListenPort": "0",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(root / "store"),
        "mappedFileSizeCommitLog": str(4 << 20),
        **SMALL_INDEX,
        **extra,
    }


def test_a_metrics_port_in_use_fails_the_broker_start_naming_the_key(tmp_path: Path) -> None:
    with _listening() as holder:
        port = holder.getsockname()[1]
        conf = _broker_conf(tmp_path, **{**PROM, "metricsPromExporterPort": str(port)})

        async def main() -> None:
            broker = BrokerController(load_broker_config(conf))
            with pytest.raises(MetricsPortError, match=f"metricsPromExporterPort={port}") as caught:
                await broker.start()
            assert "address already in use" in str(caught.value).lower()
            assert broker.server is None  # nothing else was bound or opened before it
            # and the same store starts at once with a free metrics port: no lock or file was left behind
            again = BrokerController(load_broker_config({**conf, "metricsPromExporterPort": "0"}))
            await again.start()
            await again.shutdown()

        run(main())


def test_a_metrics_port_in_use_fails_mqbroker_with_a_clear_message(tmp_path: Path) -> None:
    with _listening() as holder:
        port = holder.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(
            "".join(
                f"{k}={v}\n"
                for k, v in _broker_conf(tmp_path, **{**PROM, "metricsPromExporterPort": str(port)}).items()
            )
        )
        done = subprocess.run(
            [sys.executable, "-m", "broker.cli.mqbroker", "-c", str(conf)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NAMESRV_ADDR": ""},
        )
    assert done.returncode == 1
    assert f"metricsPromExporterPort={port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_metrics_port_in_use_fails_the_namesrv_start_naming_the_key(tmp_path: Path) -> None:
    with _listening() as holder:
        port = holder.getsockname()[1]
        config = NamesrvConfig.from_properties(
            {"listenPort": "0", "kvConfigPath": str(tmp_path / "kv.json"), **PROM, "metricsPromExporterPort": str(port)}
        )

        async def main() -> None:
            namesrv = NamesrvController(config)
            with pytest.raises(MetricsPortError, match=f"metricsPromExporterPort={port}"):
                await namesrv.start()

        run(main())


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("metricsPromExporterPort", "fifty", "valid integer"),
        ("metricsPromExporterPort", "70000", "less than or equal to 65535"),
        ("metricsPromExporterPort", "-1", "greater than or equal to 0"),
        ("metricsExporterType", "PROMETHEUS", "unknown exporter type 'PROMETHEUS'"),
        ("metricsExporterType", "prom", "unknown exporter type 'prom'"),
        ("metricsExporterType", "OTLP_GRPC", "OTLP_GRPC is a RocketMQ exporter this server does not have"),
    ],
)
def test_malformed_metrics_keys_are_refused_by_name(tmp_path: Path, key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=key) as broker_error:
        load_broker_config(_broker_conf(tmp_path, **{key: value}))
    assert says in str(broker_error.value)
    with pytest.raises(ConfigError, match=key) as namesrv_error:
        NamesrvConfig.from_properties({key: value})
    assert says in str(namesrv_error.value)


def test_the_defaults_are_rocketmqs(tmp_path: Path) -> None:
    broker = load_broker_config(_broker_conf(tmp_path)).broker
    assert (broker.metrics_exporter_type, broker.metrics_prom_exporter_port) == ("DISABLE", 5557)
    namesrv = NamesrvConfig()
    assert (namesrv.metrics_exporter_type, namesrv.metrics_prom_exporter_port) == ("DISABLE", 5557)


def test_requests_other_than_a_scrape_get_a_4xx_and_the_endpoint_keeps_serving(tmp_path: Path) -> None:
    async def main() -> None:
        async with local_cluster(tmp_path, **PROM) as cluster:
            port = cluster.running_broker.metrics.port
            assert (await http_get(port, "/"))[0] == "HTTP/1.1 404 Not Found"
            assert (await http_get(port, "/metrics", method="POST"))[0] == "HTTP/1.1 405 Method Not Allowed"
            status, body = await http_get(port, "/metrics", method="HEAD")
            assert (status, body) == ("HTTP/1.1 200 OK", b"")
            # garbage and an oversized head: answered and closed
            for junk in (b"\x16\x03\x01 not http\r\n\r\n", b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20_000):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(junk)
                reply = await asyncio.wait_for(reader.read(), 10)
                writer.close()
                assert reply.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), reply[:60]
            # two scrapes on one kept-alive connection, as Prometheus scrapes
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(2):
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))[15:])
                body = await reader.readexactly(length)
                assert head.startswith(b"HTTP/1.1 200 OK")
                assert b"rocketmq_topic_number" in body
            writer.close()
            # OpenMetrics when asked, from prometheus-client's encoder
            status, body = await http_get(port, headers="Accept: application/openmetrics-text; version=1.0.0\r\n")
            assert status == "HTTP/1.1 200 OK" and body.rstrip().endswith(b"# EOF")
            assert (await scrape(port)).value("rocketmq_broker_permission") == 6

    run(main())


def test_namesrv_metrics(tmp_path: Path) -> None:
    """The NameServer's own: live brokers and topics per cluster, connections, request latency per code."""

    async def main() -> None:
        namesrv = NamesrvController(
            NamesrvConfig.from_properties({"listenPort": "0", "kvConfigPath": str(tmp_path / "kv.json"), **PROM})
        )
        await namesrv.start()
        addr = f"127.0.0.1:{namesrv.port}"
        conf = _broker_conf(tmp_path, brokerClusterName="NsCluster", namesrvAddr=addr)
        broker = BrokerController(load_broker_config(conf))
        await broker.start()
        try:
            async with Admin(addr) as admin:
                await admin.create_topic("NsTopic", read_queue_nums=2, write_queue_nums=2)
                for _ in range(200):
                    if "NsTopic" in await admin.topic_list():
                        break
                    await asyncio.sleep(0.05)
                await admin.topic_route("NsTopic")
            s: Scrape = await scrape(namesrv.metrics.port)  # type: ignore[union-attr]
            node = {"node_type": "nameserver", "cluster": "NsCluster"}
            assert s.value("rocketmq_broker_number", **node) == 1
            topics = namesrv.routes.topics_by_cluster("NsCluster")
            assert "NsTopic" in topics
            assert s.value("rocketmq_topic_number", **node) == len(topics)
            assert s.value("rocketmq_connections") >= 1  # the broker's
            registered = s.total("rocketmq_rpc_latency_count", request_code="register_broker", response_code="success")
            assert registered >= 2  # at the broker's start, and again for the new topic
            assert s.total("rocketmq_rpc_latency_count", request_code="get_routeinfo_by_topic") >= 1
        finally:
            await broker.shutdown()
            await namesrv.shutdown()

    run(main())
