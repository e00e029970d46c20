"""The NameServer with authenticationEnabled (ours; RocketMQ's has none): writes need a signature by a user of
its keys, reads of routes and cluster info stay open, and a broker registers only with the right credentials."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker.config.errors import ConfigError
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.protocol.codes import ResponseCode
from broker.protocol.signature import Credentials
from tests.auth.auth_harness import INNER, ROOT, SigningConnection
from tests.local_cluster import wait_for
from tests.server.server_harness import Cluster, TestClient

NAMESRV_AUTH = {
    "authenticationEnabled": "true",
    "initAuthenticationUser": orjson.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}).decode(),
    "innerClientAuthenticationCredentials": orjson.dumps(
        {"accessKey": INNER.access_key, "secretKey": INNER.secret_key}
    ).decode(),
}


class SecuredNamesrvCluster(Cluster):
    async def start(self) -> None:
        self.namesrv = NamesrvController(
            NamesrvConfig.from_properties(
                {
                    "listenPort": "0",
                    "kvConfigPath": str(self.root / "kv.json"),
                    "configStorePath": str(self.root / "namesrv.properties"),
                    **NAMESRV_AUTH,
                }
            )
        )
        await self.namesrv.start()
        await self.start_broker()


@contextlib.asynccontextmanager
async def secured(root: Path, **broker_extra: Any) -> AsyncIterator[SecuredNamesrvCluster]:
    c = SecuredNamesrvCluster(root, broker_extra, commit_log_file_size=4 << 20)
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


async def _namesrv_client(c: Cluster, creds: Credentials | None) -> TestClient:
    client = await c.namesrv_client()
    client.conn = SigningConnection(client.conn, creds)  # type: ignore[assignment]
    return client


def _registered(c: Cluster) -> bool:
    assert c.namesrv is not None
    return bool(c.namesrv.routes.live_brokers())


async def test_a_broker_with_the_inner_credentials_registers_and_reads_stay_open(tmp_path: Path) -> None:
    inner = orjson.dumps({"accessKey": INNER.access_key, "secretKey": INNER.secret_key}).decode()
    async with secured(tmp_path, innerClientAuthenticationCredentials=inner) as c:
        await wait_for(lambda: _registered(c), 5.0, "the broker's registration")
        anonymous = await _namesrv_client(c, None)
        info = await anonymous.request(106)  # GET_BROKER_CLUSTER_INFO
        assert info.code == ResponseCode.SUCCESS and b"broker-t" in info.body
        kv = await anonymous.request(100, {"namespace": "ns", "key": "k", "value": "v"})
        assert kv.code == ResponseCode.NO_PERMISSION and "username cannot be null" in (kv.remark or "")
        forged = await _namesrv_client(c, Credentials(ROOT.access_key, "not-the-secret"))
        assert (await forged.request(100, {"namespace": "ns", "key": "k", "value": "v"})).code == 16
        root = await _namesrv_client(c, ROOT)
        assert (await root.request(100, {"namespace": "ns", "key": "k", "value": "v"})).code == 0
        assert (await anonymous.request(101, {"namespace": "ns", "key": "k"})).code == 0  # GET_KV_CONFIG: a read
        config = await root.request(319)  # GET_NAMESRV_CONFIG: signed, secrets masked
        assert config.code == 0 and ROOT.secret_key.encode() not in config.body
        assert INNER.secret_key.encode() not in config.body


async def test_a_broker_without_credentials_is_not_registered(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with secured(tmp_path) as c:
        await asyncio.sleep(0.5)
        assert not _registered(c)
        # an unsigned REGISTER_BROKER is refused, the NameServer keeps serving
        anonymous = await _namesrv_client(c, None)
        assert (await anonymous.request(106)).code == 0
    assert "username cannot be null" in caplog.text  # the broker logs the NameServer's refusal


def test_bad_auth_keys_name_the_key_not_the_value() -> None:
    with pytest.raises(ConfigError) as info:
        NamesrvConfig.from_properties({"initAuthenticationUser": '{"username":"u","password":"SECRETVALUE"'})
    assert "initAuthenticationUser" in str(info.value) and "SECRETVALUE" not in str(info.value)
    config = NamesrvConfig.from_properties(NAMESRV_AUTH)
    assert ROOT.secret_key not in repr(config) and INNER.secret_key not in str(config)
