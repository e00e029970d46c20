"""Harness of the gRPC endpoint tests: our NameServer and broker as real subprocesses with `enableProxy=true`,
and the official Python SDK (rocketmq-python-client 5.1.2, the `grpc` extra) or raw gRPC calls against it.

`GrpcServers` is the interop `ServerPair` with the endpoint on a free port; `create_topic` makes a topic with a
`message.type` attribute (FIFO, DELAY, TRANSACTION need one, as on RocketMQ); `raw_stub` is a plain gRPC stub
with the metadata the SDK sends, for hostile and field-level checks.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import orjson
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import service_pb2_grpc

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import RemotingClient
from tests.interop.interop_harness import ServerPair, free_port
from tests.tls_certs import LOCAL_HOSTS, Pki

__all__ = [
    "GrpcServers",
    "client_metadata",
    "create_group",
    "create_topic",
    "raw_channel",
    "sdk_config",
    "sdk_send",
    "unique_name",
]


class GrpcServers(ServerPair):
    """A NameServer and a broker subprocess; the broker serves gRPC on `grpc_port`."""

    def __init__(self, root: Path, extra: dict[str, str] | None = None) -> None:
        self.grpc_port = free_port()
        super().__init__(root, {"enableProxy": "true", "grpcServerPort": str(self.grpc_port), **(extra or {})})

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


def unique_name(prefix: str) -> str:
    """A topic or group name of `prefix` that no other test uses (the servers are shared by the session)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def sdk_config(servers: GrpcServers) -> ClientConfiguration:
    """The official SDK's configuration for `servers`: no credentials, 10 s a request."""
    return ClientConfiguration(servers.grpc_endpoint, Credentials(), request_timeout=10)


def sdk_send(servers: GrpcServers, topic: str, count: int) -> list[str]:
    """`count` messages sent by the SDK's producer (body `grpc-<i>`, tag TagG, keys `gk-<i>`, property
    `seq`); their message ids."""
    producer = Producer(sdk_config(servers), (topic,))
    producer.startup()
    try:
        ids = []
        for i in range(count):
            msg = Message()
            msg.topic, msg.body, msg.tag = topic, f"grpc-{i}".encode(), "TagG"
            msg.keys = f"gk-{i}"
            msg.add_property("seq", str(i))
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


Signer = Callable[[RemotingCommand], None]


def enforcing_tls_keys(pki: Pki, hosts: tuple[str, ...] = LOCAL_HOSTS) -> dict[str, str]:
    """Broker keys for TLS only on both ports, with a certificate of `pki` for `hosts` whose key is
    password-protected."""
    cert, key = pki.issue("broker", hosts, key_password="broker-key-pw")
    return {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
        "tls.server.keyPassword": "broker-key-pw",
        "tls.test.mode.enable": "false",
    }


def create_topic(
    servers: ServerPair,
    topic: str,
    message_type: str | None = None,
    queues: int = 4,
    *,
    signer: Signer | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker (with `+message.type=...`), then wait until the NameServer routes it;
    `signer` (broker.protocol.signature.Credentials) and `tls` for a secured broker."""

    async def create() -> None:
        client = RemotingClient(signer=signer, tls=tls)
        ext = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        if message_type:
            ext["attributes"] = f"+message.type={message_type}"
        try:
            response = await client.invoke(
                servers.broker_addr, RemotingCommand(code=RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=ext), 5
            )
            assert response.code == 0, response.remark
            deadline = time.monotonic() + 20
            while True:
                cmd = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
                if (await client.invoke(servers.namesrv_addr, cmd, 5)).code == 0:
                    return
                assert time.monotonic() < deadline, f"{topic} never reached the NameServer"
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    asyncio.run(create())


def create_group(servers: ServerPair, group: str, *, signer: Signer | None = None, **config: object) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with SubscriptionGroupConfig keys (e.g. consumeMessageOrderly=True)."""

    async def create() -> None:
        client = RemotingClient(signer=signer)
        body = orjson.dumps({"groupName": group, **config})
        try:
            cmd = RemotingCommand(code=RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            response = await client.invoke(servers.broker_addr, cmd, 5)
            assert response.code == 0, response.remark
        finally:
            await client.close()

    asyncio.run(create())


def client_metadata(client_id: str | None = None) -> list[tuple[str, str]]:
    """The metadata the Python SDK sends (without a signature: the endpoint has no authentication)."""
    return [
        ("x-mq-client-id", client_id or f"test@{uuid.uuid4().hex[:8]}"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-request-id", str(uuid.uuid4())),
    ]


def raw_channel(endpoint: str, max_send: int = 256 << 20) -> tuple[grpc.Channel, Any]:
    """A plaintext channel and a MessagingService stub on it."""
    channel = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", max_send)])
    return channel, service_pb2_grpc.MessagingServiceStub(channel)
