"""Shared pieces of the auth tests: broker.conf keys of a secured broker, and raw clients that sign."""

from __future__ import annotations

from typing import Any

import orjson

from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials, sign_command
from broker.transport.connection import RemotingConnection
from tests.server.server_harness import Cluster, TestClient

ROOT = Credentials("root", "rootsecret1")
INNER = Credentials("inner-broker", "innersecret1")

SECURED: dict[str, str] = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "initAuthenticationUser": orjson.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}).decode(),
    "innerClientAuthenticationCredentials": orjson.dumps(
        {"accessKey": INNER.access_key, "secretKey": INNER.secret_key}
    ).decode(),
}


class SigningConnection:
    """A connection whose requests are signed with `credentials` (None: sent as they are)."""

    def __init__(self, conn: RemotingConnection, credentials: Credentials | None) -> None:
        self.conn = conn
        self.credentials = credentials

    def _sign(self, cmd: RemotingCommand) -> RemotingCommand:
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        return cmd

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        return await self.conn.invoke(self._sign(cmd), timeout)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        await self.conn.invoke_oneway(self._sign(cmd))

    def close(self) -> None:
        self.conn.close()

    @property
    def is_closing(self) -> bool:
        return self.conn.is_closing


async def signed_client(c: Cluster, credentials: Credentials | None) -> TestClient:
    client = await c.client()
    client.conn = SigningConnection(client.conn, credentials)  # type: ignore[assignment]
    return client


async def create_user(admin: TestClient, name: str, password: str, user_type: str = "Normal") -> RemotingCommand:
    body = orjson.dumps({"username": name, "password": password, "userType": user_type})
    return await admin.request(3001, {"username": name}, body)


def acl_body(subject: str, *entries: dict[str, Any]) -> bytes:
    return orjson.dumps({"subject": subject, "policies": [{"policyType": "Custom", "entries": list(entries)}]})


def entry(resource: str, actions: list[str], decision: str = "Allow", **extra: Any) -> dict[str, Any]:
    return {"resource": resource, "actions": actions, "decision": decision, **extra}
