"""gRPC clients: their settings, their telemetry streams, and their place in the broker's client tables.

A client is known by its `x-mq-client-id`. Its settings (first command of each telemetry stream) register it with
an in-process HEART_BEAT, over a `ClientChannel` that stands for the client in the producer and consumer tables;
the Heartbeat RPC repeats that registration (the tables expire channels not heard from for
`channelExpiredTimeout`), NotifyClientTermination undoes it. What the broker sends to the client (a transaction
check) is queued on its newest telemetry stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from broker.grpc.local import ClientChannel, LocalBroker
from broker.grpc.settings import ClientKind, heartbeat_body, kind_of
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand

__all__ = ["Client", "ClientRegistry", "RegistrationError"]

log = logging.getLogger(__name__)

#: Commands queued for a telemetry stream the client does not read: beyond this the oldest are dropped.
MAX_QUEUED_COMMANDS = 1024
#: Clients not heard from (heartbeat, telemetry, any RPC) for this long are forgotten.
CLIENT_EXPIRY_S = 300.0
#: A client without a telemetry stream and not heard from for this long counts as gone for auto-renew (the SDKs
#: send a heartbeat every 10 s), so that its held messages go back to its group well before it is forgotten.
CLIENT_GONE_S = 30.0


class RegistrationError(Exception):
    """Settings or a heartbeat the broker refused; `code` is its remoting response code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class Client:
    """One client id: its channel, its last settings (raw protobuf and parsed), its telemetry queues."""

    channel: ClientChannel
    language: str
    version: str
    settings: Any = None
    kind: ClientKind | None = None
    streams: list[asyncio.Queue[Any]] = field(default_factory=list)
    seen: float = field(default_factory=time.monotonic)


class ClientRegistry:
    """Every gRPC client of this endpoint. `on_broker_request(client, cmd)` turns a broker request sent to a
    client (CHECK_TRANSACTION_STATE) into a telemetry command, or None to ignore it."""

    def __init__(
        self, local: LocalBroker, on_broker_request: Callable[[Client, RemotingCommand], Awaitable[Any]]
    ) -> None:
        self.local = local
        self.clients: dict[str, Client] = {}
        self._on_broker_request = on_broker_request
        #: called with the client id of every client forgotten (auto-renew releases its handles)
        self.on_forget: list[Callable[[str], Awaitable[object]]] = []

    def gone(self, client_id: str, now: float | None = None) -> bool:
        """Whether a client is forgotten, or has no telemetry stream and was not heard from for CLIENT_GONE_S."""
        client = self.clients.get(client_id)
        if client is None:
            return True
        now = time.monotonic() if now is None else now
        return not client.streams and now - client.seen > CLIENT_GONE_S

    def client(self, client_id: str, peer: str, language: str = "", version: str = "") -> Client:
        """The client of this id, made on first sight."""
        existing = self.clients.get(client_id)
        if existing is not None:
            existing.seen = time.monotonic()
            return existing

        async def on_request(cmd: RemotingCommand) -> None:
            await self._deliver(client, cmd)

        client = Client(ClientChannel(client_id, peer, on_request), language, version)
        self.clients[client_id] = client
        return client

    async def _deliver(self, client: Client, cmd: RemotingCommand) -> None:
        command = await self._on_broker_request(client, cmd)
        if command is None:
            return
        if not client.streams:
            raise ConnectionError(f"gRPC client {client.channel.client_id} has no telemetry stream")
        self.push(client, command)

    @staticmethod
    def push(client: Client, command: Any) -> None:
        queue = client.streams[-1]
        if queue.qsize() >= MAX_QUEUED_COMMANDS:
            queue.get_nowait()
        queue.put_nowait(command)

    async def apply_settings(self, client: Client, settings: Any) -> ClientKind:
        """Register the client as its settings say; ValueError for settings naming no role."""
        kind = kind_of(settings)
        client.settings, client.kind = settings, kind
        await self.register(client)
        return kind

    async def register(self, client: Client) -> None:
        """(Re-)register the client in the broker's tables; RegistrationError when the broker refuses."""
        kind = client.kind
        if kind is None:
            raise RegistrationError(ResponseCode.SYSTEM_ERROR, "no settings received from this client yet")
        client.seen = time.monotonic()
        response = await self.local.invoke(
            RequestCode.HEART_BEAT,
            {},
            heartbeat_body(client.channel.client_id, kind),
            channel=client.channel,
        )
        if response.code != ResponseCode.SUCCESS:
            raise RegistrationError(response.code, response.remark or "heartbeat refused")

    async def terminate(self, client_id: str, *, end_streams: bool = False) -> None:
        """Forget a client: out of the broker's tables. Its telemetry streams stay open until the client closes
        them (the SDKs send NotifyClientTermination first, and log an error for a stream ended under them), or
        end now with `end_streams` (the endpoint stopping)."""
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        kind = client.kind
        if kind is not None:
            groups = [("producerGroup", t) for t in kind.topics]
            if kind.group:
                groups.append(("consumerGroup", kind.group))
            for key, group in groups:
                await self.local.invoke(
                    RequestCode.UNREGISTER_CLIENT, {"clientID": client_id, key: group}, channel=client.channel
                )
        client.channel.closed = True
        for forget in self.on_forget:
            try:
                await forget(client_id)
            except Exception:
                log.exception("releasing what gRPC client %s held failed", client_id)
        if end_streams:
            for queue in client.streams:
                queue.put_nowait(None)  # ends the stream

    async def expire(self, now: float | None = None) -> int:
        """Forget clients silent for CLIENT_EXPIRY_S; how many."""
        now = time.monotonic() if now is None else now
        stale = [cid for cid, c in self.clients.items() if now - c.seen > CLIENT_EXPIRY_S and not c.streams]
        for cid in stale:
            await self.terminate(cid, end_streams=True)
        return len(stale)

    async def close(self) -> None:
        for cid in list(self.clients):
            await self.terminate(cid, end_streams=True)
