"""A gRPC message whose `born_host` is a host name, not an IP (what rocketmq-client-java 5.x sends): stored with the
connection's address as its born host, the name kept in `__BORNHOST`, and received over gRPC with that name."""

from __future__ import annotations

import time
import uuid

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.client import BlockingPullConsumer, MessageExt
from broker.client.message import MessageQueue
from tests.grpc_endpoint.grpc_harness import GrpcServers, client_metadata, create_topic, raw_channel
from tests.interop.interop_harness import BROKER_NAME


def _pull_one(servers: GrpcServers, topic: str) -> MessageExt:
    consumer = BlockingPullConsumer(f"GID-born-{uuid.uuid4().hex[:8]}", servers.namesrv_addr)
    consumer.assign([MessageQueue(topic, BROKER_NAME, q) for q in range(4)])
    consumer.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            batch = consumer.poll(1.0)
            if batch:
                return batch[0]
    finally:
        consumer.shutdown()
    raise AssertionError(f"nothing to pull from {topic}")


def test_host_name_born_host_is_stored_with_the_peer_address(grpc_servers: GrpcServers) -> None:
    topic = f"BornHost{uuid.uuid4().hex[:8]}"
    create_topic(grpc_servers, topic)
    request = service_pb2.SendMessageRequest()
    msg = request.messages.add()
    msg.topic.name = topic
    msg.body = b"from a named host"
    msg.system_properties.message_id = uuid.uuid4().hex.upper()
    msg.system_properties.body_encoding = definition_pb2.Encoding.IDENTITY
    msg.system_properties.message_type = definition_pb2.MessageType.NORMAL
    msg.system_properties.born_host = "java-host.example"
    channel, stub = raw_channel(grpc_servers.grpc_endpoint)
    with channel:
        reply = stub.SendMessage(request, metadata=client_metadata(), timeout=10)
    assert reply.status.code == definition_pb2.Code.OK, reply
    stored = _pull_one(grpc_servers, topic)
    assert stored.body == b"from a named host"
    # the test's channel connects over loopback: that is the address stored
    assert stored.born_host[0] == "127.0.0.1" and stored.born_host[1] > 0, stored.born_host
    assert stored.properties["__BORNHOST"] == "java-host.example"
