"""Authentication and ACL 2.0 on the gRPC endpoint: the official Python SDK (rocketmq-python-client 5.1.2,
unchanged) signs with its Credentials; the broker checks them against its own users and ACLs.

A broker with authenticationEnabled and authorizationEnabled (the remoting auth tests' keys), users and ACLs made
over the remoting admin requests 3001/3006 by the init SUPER user. Refusals are checked on raw RPCs with the
metadata the SDK sends, signed or altered by hand, for their exact status (UNAUTHORIZED 40100, as RocketMQ's
proxy answers authentication and authorization failures alike); after each, a good client is still served.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import grpc
import orjson
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials as RemotingCredentials
from broker.transport.client import RemotingClient
from tests.auth.auth_harness import ROOT, SECURED, acl_body, entry
from tests.grpc_endpoint.grpc_harness import GrpcServers, client_metadata, create_topic, raw_channel

Code = definition_pb2.Code

ALICE = ("alice", "alice-secret-1")  # Pub and Sub on TOPIC, Sub on GROUP
BOB = ("bob", "bob-secret-12")  # Sub on TOPIC only
TOPIC = f"GrpcAuthTopic{uuid.uuid4().hex[:6]}"
GROUP = f"GID-grpc-auth-{uuid.uuid4().hex[:6]}"


def _admin(servers: GrpcServers, code: int, fields: dict[str, str], body: bytes) -> None:
    async def call() -> None:
        client = RemotingClient(signer=ROOT)
        try:
            response = await client.invoke(
                servers.broker_addr, RemotingCommand(code=code, ext_fields=fields, body=body), 5
            )
            assert response.code == 0, response.remark
        finally:
            await client.close()

    asyncio.run(call())


def _user(servers: GrpcServers, name: str, password: str, *entries: dict[str, Any]) -> None:
    body = orjson.dumps({"username": name, "password": password, "userType": "Normal"})
    _admin(servers, 3001, {"username": name}, body)
    _admin(servers, 3006, {"subject": f"User:{name}"}, acl_body(f"User:{name}", *entries))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServers]:
    servers = GrpcServers(tmp_path_factory.mktemp("grpc-auth"), extra=SECURED)
    try:
        servers.start()
        create_topic(servers, TOPIC, signer=ROOT)
        _user(
            servers,
            *ALICE,
            entry(f"Topic:{TOPIC}", ["Pub", "Sub"]),
            entry(f"Group:{GROUP}", ["Sub"]),
        )
        _user(servers, *BOB, entry(f"Topic:{TOPIC}", ["Sub"]))
        yield servers
    finally:
        servers.stop()


def _config(servers: GrpcServers, ak: str, sk: str) -> ClientConfiguration:
    return ClientConfiguration(servers.grpc_endpoint, Credentials(ak, sk), request_timeout=10)


def signed_metadata(
    ak: str, sk: str, date_time: str | None = None, *, sign_over: str | None = None
) -> list[tuple[str, str]]:
    """The SDK's metadata, signed as `rocketmq.v5.util.signature` signs (HMAC-SHA1 hex of the date-time);
    `sign_over`: sign another date-time than the one sent (a replayed signature)."""
    now = date_time or datetime.now().strftime("%Y%m%dT%H%M%SZ")
    signature = hmac.new(sk.encode(), (sign_over or now).encode(), hashlib.sha1).hexdigest()
    return [
        *client_metadata(),
        ("x-mq-date-time", now),
        ("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={signature}"),
    ]


def _route(servers: GrpcServers, metadata: list[tuple[str, str]], topic: str = TOPIC) -> Any:
    channel, stub = raw_channel(servers.grpc_endpoint)
    with channel:
        request = service_pb2.QueryRouteRequest()
        request.topic.name = topic
        return stub.QueryRoute(request, metadata=metadata, timeout=10)


def _send(servers: GrpcServers, metadata: list[tuple[str, str]], topic: str = TOPIC) -> Any:
    channel, stub = raw_channel(servers.grpc_endpoint)
    with channel:
        request = service_pb2.SendMessageRequest()
        msg = request.messages.add()
        msg.topic.name = topic
        msg.body = b"refused?"
        msg.system_properties.message_id = uuid.uuid4().hex.upper()
        msg.system_properties.body_encoding = definition_pb2.Encoding.IDENTITY
        msg.system_properties.message_type = definition_pb2.MessageType.NORMAL
        return stub.SendMessage(request, metadata=metadata, timeout=10)


def _alice_still_served(servers: GrpcServers) -> None:
    reply = _route(servers, signed_metadata(*ALICE))
    assert reply.status.code == Code.OK, reply.status
    assert reply.message_queues


def test_sdk_with_credentials_sends_and_receives(secured: GrpcServers) -> None:
    producer = Producer(_config(secured, *ALICE), (TOPIC,))
    producer.startup()
    try:
        sent = []
        for i in range(3):
            msg = Message()
            msg.topic = TOPIC
            msg.body = f"signed #{i}".encode()
            sent.append(producer.send(msg).message_id)
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(_config(secured, *ALICE), GROUP, {TOPIC: FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        got: dict[str, bytes] = {}
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for message in consumer.receive(32, 15) or ():
                got[message.message_id] = message.body
                consumer.ack(message)
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(sent)
    assert sorted(got.values()) == [f"signed #{i}".encode() for i in range(3)]


def test_sdk_with_a_wrong_secret_is_refused(secured: GrpcServers, caplog: pytest.LogCaptureFixture) -> None:
    producer = Producer(_config(secured, ALICE[0], "not-the-secret"), (TOPIC,))
    # the SDK's start logs the refused route fetch and goes on; its send then fails for want of the route, and
    # its log names the broker's status
    producer.startup()
    try:
        msg = Message()
        msg.topic = TOPIC
        msg.body = b"never stored"
        with pytest.raises(Exception, match="failed to fetch topic"):
            producer.send(msg)
    finally:
        producer.shutdown()
    assert "40100, check signature failed. (User:alice, QueryRouteRequest)" in caplog.text
    _alice_still_served(secured)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        (signed_metadata(ALICE[0], "wrong-secret"), "check signature failed. (User:alice, QueryRouteRequest)"),
        (signed_metadata("nobody", "whatever1"), "User:nobody is not found."),
        (client_metadata(), "username cannot be null."),  # no authorization at all
        (
            [(k, v.split(", Signature=")[0]) if k == "authorization" else (k, v) for k, v in signed_metadata(*ALICE)],
            "sent no Signature",
        ),
        (  # a signature of another date-time: a replayed header with its date-time changed
            signed_metadata(*ALICE, "20240101T000000Z", sign_over="20240101T000001Z"),
            "check signature failed.",
        ),
        ([(k, v) for k, v in signed_metadata(*ALICE) if k != "x-mq-date-time"], "datetime is null."),
        (signed_metadata(*ALICE, "garbled\u00e9date"), None),  # signed, so accepted: any text is the content
        (signed_metadata("", ""), "username cannot be null."),  # the SDK's default empty Credentials()
    ],
    ids=[
        "wrong-secret",
        "unknown-user",
        "no-authorization",
        "no-signature",
        "changed-date-time",
        "no-date-time",
        "garbled-but-signed-date-time",
        "empty-credentials",
    ],
)
def test_bad_signatures_get_unauthorized(
    secured: GrpcServers, metadata: list[tuple[str, str]], expected: str | None
) -> None:
    if any(not v.isascii() for _k, v in metadata):
        # grpcio refuses non-ASCII metadata values on the client side: send a garbled ASCII one instead
        metadata = signed_metadata(*ALICE, "??garbled//date")
    reply = _route(secured, metadata)
    if expected is None:
        assert reply.status.code == Code.OK, reply.status
    else:
        assert reply.status.code == Code.UNAUTHORIZED, reply.status
        assert expected in reply.status.message
        assert ALICE[1] not in reply.status.message
        assert not reply.message_queues
    _alice_still_served(secured)


def test_a_user_without_pub_cannot_send_but_can_route(secured: GrpcServers) -> None:
    bob = signed_metadata(*BOB)
    assert _route(secured, bob).status.code == Code.OK  # QueryRoute needs Pub or Sub: bob has Sub
    reply = _send(secured, bob)
    assert reply.status.code == Code.UNAUTHORIZED, reply.status
    assert f"User:bob has no permission to access Topic:{TOPIC}" in reply.status.message
    assert "Pub" in reply.status.message
    # a topic bob has nothing on: not even its route
    assert _route(secured, bob, "SomeOtherTopic").status.code == Code.UNAUTHORIZED
    # alice's send is served
    assert _send(secured, signed_metadata(*ALICE)).status.code == Code.OK


def test_sdk_producer_without_pub_gets_the_refusal(secured: GrpcServers) -> None:
    producer = Producer(_config(secured, *BOB), (TOPIC,))
    producer.startup()  # the route is readable (Sub)
    try:
        msg = Message()
        msg.topic = TOPIC
        msg.body = b"bob's"
        with pytest.raises(Exception, match="no permission"):
            producer.send(msg)
    finally:
        producer.shutdown()
    _alice_still_served(secured)


def test_receive_needs_the_group(secured: GrpcServers) -> None:
    channel, stub = raw_channel(secured.grpc_endpoint)
    with channel:
        request = service_pb2.ReceiveMessageRequest()
        request.group.name = GROUP
        request.message_queue.topic.name = TOPIC
        request.batch_size = 1
        request.invisible_duration.FromSeconds(30)
        request.long_polling_timeout.FromSeconds(5)
        replies = list(stub.ReceiveMessage(request, metadata=signed_metadata(*BOB), timeout=15))
    assert len(replies) == 1 and replies[0].status.code == Code.UNAUTHORIZED
    assert f"Group:{GROUP}" in replies[0].status.message


def test_telemetry_settings_of_a_refused_user_get_an_unauthorized_status(secured: GrpcServers) -> None:
    channel, stub = raw_channel(secured.grpc_endpoint)
    with channel:
        command = service_pb2.TelemetryCommand()
        command.settings.client_type = definition_pb2.ClientType.PRODUCER
        command.settings.publishing.topics.add().name = TOPIC
        stream = stub.Telemetry(iter([command]), metadata=signed_metadata(*BOB), timeout=10)
        first = next(iter(stream))
        assert first.status.code == Code.UNAUTHORIZED, first
        assert "Pub" in first.status.message
        stream.cancel()


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        ("MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature=" + "ab" * 600, "at most 1024"),
        ("garbage", "authentication header is incorrect."),
        ("MQv2-HMAC-SHA1 Credential", "keyValues length is incorrect"),
        ("MQv2-HMAC-SHA1 Credential=alice, Signature=zz-not-hex", "not hexadecimal"),
        ("Basic YWxpY2U6c2VjcmV0", "not MQv2-HMAC-SHA1"),
    ],
    ids=["oversized", "one-word", "no-equals", "non-hex", "other-scheme"],
)
def test_malformed_authorization_gets_a_clear_refusal(secured: GrpcServers, authorization: str, expected: str) -> None:
    metadata = [(k, authorization if k == "authorization" else v) for k, v in signed_metadata(*ALICE)]
    reply = _route(secured, metadata)
    assert reply.status.code == Code.UNAUTHORIZED, reply.status
    assert expected in reply.status.message
    assert len(reply.status.message) < 300  # the value is not echoed back whole
    _alice_still_served(secured)


def test_metadata_above_grpcs_bound_is_refused_by_the_transport(secured: GrpcServers) -> None:
    metadata = [(k, v + "x" * 20_000 if k == "authorization" else v) for k, v in signed_metadata(*ALICE)]
    with pytest.raises(grpc.RpcError) as info:
        _route(secured, metadata)
    assert info.value.code() in (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
    )
    _alice_still_served(secured)


def test_remoting_signing_of_the_same_users_still_works(secured: GrpcServers) -> None:
    """The gRPC checks share the broker's store and checker: the same users sign remoting requests as before."""

    async def call(user: tuple[str, str]) -> int:
        client = RemotingClient(signer=RemotingCredentials(*user))
        try:
            fields = {"topic": TOPIC, "consumerGroup": GROUP, "queueId": "0"}
            cmd = RemotingCommand(code=RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=fields)
            return (await client.invoke(secured.broker_addr, cmd, 5)).code
        finally:
            await client.close()

    assert asyncio.run(call(ALICE)) != ResponseCode.NO_PERMISSION  # Sub on the topic and the group
    assert asyncio.run(call(BOB)) == ResponseCode.NO_PERMISSION  # nothing on the group
