"""Our SDK over TLS against an in-process NameServer and broker: enforcing (TLS served, plaintext refused with a
clear error), permissive (both served), mutual TLS; and the broker's own connections (registration) over TLS."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from broker.client import Admin, ClientConfig, Message, Producer, PullConsumer, SendStatus
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.transport.listener import TLS_REQUIRED_REMARK
from tests.local_cluster import LocalCluster, local_cluster
from tests.tls_certs import Pki, make_pki


class TlsCluster(LocalCluster):
    """A LocalCluster whose NameServer and broker take the same tls.* keys (`broker_extra`'s tls.* entries)."""

    tls_client: dict[str, Any]

    async def start(self) -> None:
        tls_keys = {k: v for k, v in self.broker_extra.items() if k.startswith("tls.")}
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate(
                {
                    "listenPort": 0,
                    "kvConfigPath": str(self.root / "kv.json"),
                    "configStorePath": str(self.root / "namesrv.properties"),
                    **tls_keys,
                }
            )
        )
        await self.namesrv.start()
        await self.start_broker()

    def client_config(self, **options: Any) -> ClientConfig:
        return super().client_config(**{**self.tls_client, **options})

    async def create_topic(self, topic: str, queues: int = 4, **options: Any) -> None:
        async with Admin(client_config=self.client_config()) as admin:
            await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues, **options)
            for _ in range(200):
                if topic in await admin.topic_list():
                    return
                await asyncio.sleep(0.05)
        raise AssertionError(f"topic {topic} never reached the NameServer")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def _server_keys(pki: Pki, mode: str, **extra: str) -> dict[str, str]:
    cert, key = pki.issue("server")
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
        "tls.test.mode.enable": "false",
        # the broker's own connections (NameServer registration) verify the NameServer too
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(pki.ca_cert),
        **extra,
    }


async def _round_trip(cluster: TlsCluster, topic: str, n: int = 5) -> None:
    await cluster.create_topic(topic, queues=2)
    async with Producer("PG-tls", client_config=cluster.client_config()) as producer:
        sent = [await producer.send(Message(topic, f"m{i}")) for i in range(n)]
    assert all(r.status is SendStatus.SEND_OK for r in sent)
    consumer = PullConsumer("CG-tls", client_config=cluster.client_config(), consume_from_where=4)
    consumer.subscribe(topic, "*")
    got: list[Any] = []
    async with consumer:
        for _ in range(20):
            got += await consumer.poll(1.0)
            if len(got) >= n:
                break
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(n))


async def test_enforcing_serves_tls_clients_and_refuses_plaintext_ones_clearly(pki: Pki, tmp_path: Path) -> None:
    async with local_cluster(tmp_path, TlsCluster, **_server_keys(pki, "enforcing")) as cluster:
        cluster.tls_client = {"use_tls": True, "tls_ca_file": str(pki.ca_cert)}
        await _round_trip(cluster, "TlsTopic")
        # the broker registered with the NameServer over TLS (enforcing: no plaintext connection was possible)
        assert cluster.running_broker.client.tls is not None
        # a plaintext client gets an error naming the cause, quickly, not a hang
        plain = ClientConfig(namesrv_addr=cluster.namesrv_addr)
        started = time.monotonic()
        with pytest.raises(Exception, match="TLS") as caught:
            async with Producer("PG-plain", client_config=plain, send_msg_timeout=3) as producer:
                await producer.send(Message("TlsTopic", "x"))
        assert time.monotonic() - started < 5
        assert TLS_REQUIRED_REMARK in str(caught.value) or "tls.server.mode=enforcing" in str(caught.value)


async def test_permissive_serves_tls_and_plaintext_clients(pki: Pki, tmp_path: Path) -> None:
    async with local_cluster(tmp_path, TlsCluster, **_server_keys(pki, "permissive", **{"tls.enable": "true"})) as c:
        c.tls_client = {"use_tls": True, "tls_ca_file": str(pki.ca_cert)}
        await _round_trip(c, "Both1")
        c.tls_client = {}
        await _round_trip(c, "Both2")


async def test_mutual_tls_client_certificates(pki: Pki, tmp_path: Path) -> None:
    client_cert, client_key = pki.issue("client", client=True)
    keys = _server_keys(
        pki,
        "enforcing",
        **{
            "tls.server.need.client.auth": "require",
            "tls.server.authClient": "true",
            "tls.server.trustCertPath": str(pki.ca_cert),
            # the broker presents a certificate of its own to the NameServer
            "tls.client.certPath": str(client_cert),
            "tls.client.keyPath": str(client_key),
        },
    )
    async with local_cluster(tmp_path, TlsCluster, **keys) as cluster:
        cluster.tls_client = {
            "use_tls": True,
            "tls_ca_file": str(pki.ca_cert),
            "tls_cert_file": str(client_cert),
            "tls_key_file": str(client_key),
        }
        await _round_trip(cluster, "MutualTopic")
        # without a client certificate: refused
        no_cert = ClientConfig(namesrv_addr=cluster.namesrv_addr, use_tls=True, tls_ca_file=str(pki.ca_cert))
        with pytest.raises(Exception):  # noqa: B017 - a closed connection or a failed handshake
            async with Admin(client_config=no_cert) as admin:
                await admin.topic_list()


def test_use_tls_defaults_to_the_tls_enable_property(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    assert ClientConfig().use_tls is False
    monkeypatch.setitem(sys._xoptions, "tls.enable", "true")
    config = ClientConfig()
    assert config.use_tls is True
    assert config.tls_context() is not None
