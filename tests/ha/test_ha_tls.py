"""Master and slave over TLS, in process on loopback: the HA link (and every remoting connection) encrypted with
tls.server.mode=enforcing, SYNC_MASTER sends acknowledged and the slave's CommitLog byte-identical, a plaintext
slave refused by an enforcing master, and the slave's read-only restore source served over TLS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.client import ClientConfig, Message, Producer, SendStatus
from broker.ha.protocol import encode_report
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.transport.tls import client_context
from tests.ha.ha_harness import FILE_SIZE, Pair, commit_log_bytes, eventually
from tests.ha.test_ha_restore_source import Peer, source_port
from tests.tls_certs import Pki, make_pki

BODY = os.urandom(8000)


@pytest.fixture(autouse=True)
def _ha_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="broker")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def tls_keys(pki: Pki, mode: str = "enforcing", **extra: str) -> dict[str, str]:
    cert, key = pki.issue("server")
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",  # the slave verifies its master (and both their NameServer)
        "tls.client.trustCertPath": str(pki.ca_cert),
        **extra,
    }


class TlsPair(Pair):
    def __init__(self, root: Path, keys: dict[str, str]) -> None:
        super().__init__(root)
        self.keys = keys

    async def start_namesrv(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": str(self.root / "kv.json"), **self.keys})
        )
        await self.namesrv.start()


@contextlib.asynccontextmanager
async def tls_pair(root: Path, keys: dict[str, str], slave_keys: dict[str, str] | None = None) -> AsyncIterator[Pair]:
    p = TlsPair(root, keys)
    await p.start_namesrv()
    await p.start_master("SYNC_MASTER", **keys)
    await p.start_slave(**(keys if slave_keys is None else slave_keys))
    try:
        yield p
    finally:
        await p.stop()


def client(p: Pair, pki: Pki) -> ClientConfig:
    assert p.namesrv is not None
    return ClientConfig(namesrv_addr=f"127.0.0.1:{p.namesrv.port}", use_tls=True, tls_ca_file=str(pki.ca_cert))


async def produce(cc: ClientConfig, topic: str, n: int, concurrency: int = 16) -> list[SendStatus]:
    async with Producer("PG", client_config=cc, retry_times_when_send_failed=0) as producer:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> SendStatus:
            async with sem:
                return (await producer.send(Message(topic, BODY + str(i).encode(), keys=f"k{i}"))).status

        return list(await asyncio.gather(*(one(i) for i in range(n))))


def _is_tls(transport: Any) -> bool:
    return transport is not None and transport.get_extra_info("ssl_object") is not None


async def test_sync_master_replicates_over_tls_byte_identical(pki: Pki, tmp_path: Path) -> None:
    async with tls_pair(tmp_path, tls_keys(pki)) as p:
        assert p.master is not None and p.slave is not None and p.master.ha is not None
        master_ha = p.master.ha.master
        assert master_ha is not None
        await eventually(lambda: master_ha.slave_count == 1, what="the slave's HA connection over TLS")
        (conn,) = master_ha.connections
        assert _is_tls(conn.writer.transport)  # the HA link itself is TLS
        statuses = await produce(client(p, pki), "TlsHaTopic", 300)  # ~2.4 MiB: three 1 MiB files
        assert statuses == [SendStatus.SEND_OK] * 300  # each acknowledged by the slave (SYNC_MASTER)
        end = p.master.store.max_phy_offset
        assert end > 2 * FILE_SIZE
        assert p.slave.store.max_phy_offset == end
        assert commit_log_bytes(p.slave, 0, end) == commit_log_bytes(p.master, 0, end)

        # the slave's restore source speaks TLS too (enforcing): a peer reads the slave's CommitLog over it
        port = source_port(p.slave)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(ca_file=str(pki.ca_cert)))
        peer = Peer(reader, writer)
        await peer.send(encode_report(0))
        await peer.follow(end)
        assert peer.start == 0 and bytes(peer.data) == commit_log_bytes(p.slave, 0, end)
        peer.close()
        # and refuses a plaintext one (the HA port just closes: it has no error response to give)
        plain = await Peer.connect(port)
        await plain.send(encode_report(0))
        with contextlib.suppress(ConnectionResetError):  # closed with the report unread: a reset
            assert await plain.closed_after() == b""


async def test_an_enforcing_master_refuses_a_plaintext_slave(pki: Pki, tmp_path: Path) -> None:
    keys = tls_keys(pki)
    # the slave talks TLS to the NameServer and remoting ports, but its HA client is given no TLS context
    async with tls_pair(tmp_path, keys) as p:
        assert p.master is not None and p.slave is not None and p.master.ha is not None
        master_ha = p.master.ha.master
        assert master_ha is not None
        await eventually(lambda: master_ha.slave_count == 1, what="the TLS slave")
        await p.slave.shutdown()
        p.slave = None
        slave = await p.start_slave(store="slave2", **{**keys, "tls.enable": "false"})
        # tls.enable=false: its remoting client is plaintext, and so is its HA client
        assert slave.client.tls is None
        await asyncio.sleep(1.5)
        assert master_ha.slave_count == 0  # refused: never reported
        statuses = await produce(client(p, pki), "NoSlave", 3)
        assert all(s is not SendStatus.SEND_OK for s in statuses)  # SYNC_MASTER: SLAVE_NOT_AVAILABLE


def test_the_ha_settings_carry_the_brokers_tls(pki: Pki) -> None:
    from broker.server.broker import ha_settings
    from broker.server.config import load_broker_config, store_config
    from broker.transport.tls import ServerTls, TlsSettings, outgoing_context

    loaded = load_broker_config({"brokerName": "b", **tls_keys(pki)})
    settings = TlsSettings.of(loaded.broker)
    tls, out = ServerTls(settings), outgoing_context(settings)
    ha = ha_settings(loaded.broker, store_config(loaded), tls, out)
    assert ha.tls is tls and isinstance(ha.client_tls, ssl.SSLContext)
    assert ha.client_tls.verify_mode == ssl.CERT_REQUIRED
