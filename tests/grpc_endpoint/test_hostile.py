"""Bad input on the gRPC port: junk protobuf bytes, requests above the inbound bound, bodies above maxMessageSize,
missing client ids, reserved properties, many streams at once, and one client opening 10 000 streams it never
reads. Each gets a clear error or a bounded cost, and the endpoint keeps serving (a QueryRoute afterwards answers)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from tests.grpc_endpoint.grpc_harness import GrpcServers, client_metadata, create_topic, raw_channel

Code = definition_pb2.Code


def _topic(servers: GrpcServers, prefix: str) -> str:
    topic = f"{prefix}{uuid.uuid4().hex[:8]}"
    create_topic(servers, topic)
    return topic


def _still_serves(servers: GrpcServers, topic: str) -> None:
    channel, stub = raw_channel(servers.grpc_endpoint)
    with channel:
        request = service_pb2.QueryRouteRequest()
        request.topic.name = topic
        reply = stub.QueryRoute(request, metadata=client_metadata(), timeout=10)
        assert reply.status.code == Code.OK, reply.status
        assert reply.message_queues


def _send_request(topic: str, body: bytes, **props: str) -> service_pb2.SendMessageRequest:
    request = service_pb2.SendMessageRequest()
    msg = request.messages.add()
    msg.topic.name = topic
    msg.body = body
    msg.system_properties.message_id = uuid.uuid4().hex.upper()
    msg.system_properties.body_encoding = definition_pb2.Encoding.IDENTITY
    msg.system_properties.message_type = definition_pb2.MessageType.NORMAL
    for key, value in props.items():
        msg.user_properties[key] = value
    return request


def test_junk_bytes_get_an_error_and_the_port_keeps_serving(grpc_servers: GrpcServers) -> None:
    topic = _topic(grpc_servers, "GrpcJunk")
    channel, _stub = raw_channel(grpc_servers.grpc_endpoint)
    with channel:
        for method in ("SendMessage", "QueryRoute", "AckMessage", "EndTransaction"):
            call = channel.unary_unary(
                f"/apache.rocketmq.v2.MessagingService/{method}",
                request_serializer=lambda raw: raw,
                response_deserializer=lambda raw: raw,
            )
            for junk in (b"\xff\xff\xff\xff\x0f", b"\x0a\xff\xff\xff\xff\xff\xff", bytes(range(256)) * 4):
                with pytest.raises(grpc.RpcError) as info:
                    call(junk, metadata=client_metadata(), timeout=10)
                # grpcio answers a request its deserializer refuses with UNKNOWN and the parser's message
                assert info.value.code() == grpc.StatusCode.UNKNOWN, info.value
                assert "Error parsing message" in (info.value.details() or ""), info.value
        unknown = channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as info:
            unknown(b"", timeout=10)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    _still_serves(grpc_servers, topic)
    # one rate-limited line per method in the broker's log, not grpcio's traceback per request
    log = (grpc_servers.root / "mqbroker.log").read_text(errors="replace")
    assert "malformed gRPC request on /apache.rocketmq.v2.MessagingService/SendMessage" in log
    assert "Traceback" not in log


def test_request_above_the_inbound_bound_is_refused(grpc_servers: GrpcServers) -> None:
    topic = _topic(grpc_servers, "GrpcHuge")
    channel, stub = raw_channel(grpc_servers.grpc_endpoint)
    with channel:
        # grpcMaxInboundMessageSize is 8 MiB in this broker.conf: grpcio refuses the frame before any handler
        with pytest.raises(grpc.RpcError) as info:
            stub.SendMessage(_send_request(topic, b"x" * (9 << 20)), metadata=client_metadata(), timeout=30)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # under the bound but above maxMessageSize (4 MiB): the proxy's status, nothing stored
        reply = stub.SendMessage(_send_request(topic, b"x" * ((4 << 20) + 1)), metadata=client_metadata(), timeout=30)
        assert reply.status.code == Code.MESSAGE_BODY_TOO_LARGE, reply.status
        reply = stub.SendMessage(_send_request(topic, b""), metadata=client_metadata(), timeout=10)
        assert reply.status.code == Code.MESSAGE_BODY_EMPTY, reply.status
    _still_serves(grpc_servers, topic)


def test_field_checks_answer_the_proxy_codes(grpc_servers: GrpcServers) -> None:
    topic = _topic(grpc_servers, "GrpcChecks")
    channel, stub = raw_channel(grpc_servers.grpc_endpoint)
    with channel:
        reply = stub.SendMessage(_send_request(topic, b"hi"), timeout=10)  # no x-mq-client-id
        assert reply.status.code == Code.CLIENT_ID_REQUIRED
        reply = stub.SendMessage(_send_request(topic, b"hi", UNIQ_KEY="x"), metadata=client_metadata(), timeout=10)
        assert reply.status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        bad_tag = _send_request(topic, b"hi")
        bad_tag.messages[0].system_properties.tag = "a|b"
        assert stub.SendMessage(bad_tag, metadata=client_metadata(), timeout=10).status.code == Code.ILLEGAL_MESSAGE_TAG
        no_id = _send_request(topic, b"hi")
        no_id.messages[0].system_properties.message_id = ""
        assert stub.SendMessage(no_id, metadata=client_metadata(), timeout=10).status.code == Code.ILLEGAL_MESSAGE_ID
        far = _send_request(topic, b"hi")
        far.messages[0].system_properties.delivery_timestamp.seconds = int(time.time()) + 3 * 86400
        assert stub.SendMessage(far, metadata=client_metadata(), timeout=10).status.code == Code.ILLEGAL_DELIVERY_TIME
        many = _send_request(topic, b"hi", **{f"p{i}": "v" for i in range(200)})
        assert (
            stub.SendMessage(many, metadata=client_metadata(), timeout=10).status.code
            == Code.MESSAGE_PROPERTIES_TOO_LARGE
        )
        route = service_pb2.QueryRouteRequest()
        route.topic.name = "NoSuchTopic" + uuid.uuid4().hex[:6]
        assert stub.QueryRoute(route, metadata=client_metadata(), timeout=10).status.code == Code.TOPIC_NOT_FOUND
        heartbeat = service_pb2.HeartbeatRequest()
        assert (
            stub.Heartbeat(heartbeat, metadata=client_metadata(), timeout=10).status.code
            == Code.UNRECOGNIZED_CLIENT_TYPE
        )
        roleless = service_pb2.TelemetryCommand()
        roleless.settings.client_type = definition_pb2.ClientType.PRODUCER  # but no publishing nor subscription
        telemetry = stub.Telemetry(iter([roleless]), metadata=client_metadata(), timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(telemetry)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _still_serves(grpc_servers, topic)


def test_many_streams_at_once(grpc_servers: GrpcServers) -> None:
    topic = _topic(grpc_servers, "GrpcStreams")

    def one(i: int) -> int:
        channel, stub = raw_channel(grpc_servers.grpc_endpoint)
        with channel:
            settings = service_pb2.TelemetryCommand()
            settings.settings.client_type = definition_pb2.ClientType.PRODUCER
            settings.settings.publishing.topics.add().name = topic
            replies = stub.Telemetry(iter([settings]), metadata=client_metadata(f"many@{i}"), timeout=20)
            first = next(iter(replies))
            replies.cancel()
            return int(first.status.code)

    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(one, range(200)))
    assert codes == [Code.OK] * 200
    _still_serves(grpc_servers, topic)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_ten_thousand_streams_never_read_cost_bounded_memory(grpc_servers: GrpcServers) -> None:
    """One client opens 10 000 Telemetry streams on one connection, sends its settings on each and never reads
    a reply. The broker holds at most a connection's share of them open (the client queues the rest), its
    memory stays bounded, and another client is served meanwhile."""
    topic = _topic(grpc_servers, "GrpcFlood")
    broker_pid = grpc_servers.procs[-1].pid
    before = _rss_mib(broker_pid)
    settings = service_pb2.TelemetryCommand()
    settings.settings.client_type = definition_pb2.ClientType.PRODUCER
    settings.settings.publishing.topics.add().name = topic

    async def flood() -> float:
        forever = asyncio.Event()

        async def requests() -> AsyncIterator[service_pb2.TelemetryCommand]:
            yield settings
            await forever.wait()  # the stream stays open, and its replies are never read

        async with grpc.aio.insecure_channel(grpc_servers.grpc_endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            calls = [stub.Telemetry(requests(), metadata=client_metadata(f"flood@{i}")) for i in range(10_000)]
            await asyncio.sleep(10)  # the broker takes what the connection may hold
            peak = _rss_mib(broker_pid)
            await asyncio.to_thread(_still_serves, grpc_servers, topic)
            for call in calls:
                call.cancel()
            forever.set()
            return peak

    peak = asyncio.run(flood())
    print(f"broker RSS {before:.0f} MiB before, {peak:.0f} MiB with the streams open")
    assert peak - before < 256, f"the broker grew from {before:.0f} MiB to {peak:.0f} MiB"
    _still_serves(grpc_servers, topic)
