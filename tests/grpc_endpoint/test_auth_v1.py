"""ACL 1.0 (`aclEnable=true`, $ROCKETMQ_HOME/conf/plain_acl.yml) on the gRPC endpoint: the accounts' secretKeys
check the SDK's signature and their topic/group permissions what each RPC asks for, as the remoting port checks
them (broker/auth/plain.py). The broker runs with its working directory as ROCKETMQ_HOME (ServerPair's cwd)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2

from broker.protocol.signature import Credentials as RemotingCredentials
from tests.grpc_endpoint.grpc_harness import GrpcServers, create_topic
from tests.grpc_endpoint.test_auth import _route, _send, signed_metadata

Code = definition_pb2.Code

TOPIC = f"GrpcAclV1Topic{uuid.uuid4().hex[:6]}"
GROUP = f"GID-grpc-v1-{uuid.uuid4().hex[:6]}"
ADMIN = ("rocketmq-admin", "admin-secret-1")
CAROL = ("carol-v1", "carol-secret-1")  # PUB|SUB on TOPIC, SUB on groups
DAVE = ("dave-v1", "dave-secret-12")  # SUB on TOPIC only

PLAIN_ACL = f"""
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {CAROL[0]}
    secretKey: {CAROL[1]}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {TOPIC}=PUB|SUB
  - accessKey: {DAVE[0]}
    secretKey: {DAVE[1]}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=SUB
"""


@pytest.fixture(scope="module")
def acl_v1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServers]:
    root = tmp_path_factory.mktemp("grpc-acl-v1")
    (root / "conf").mkdir()
    (root / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    servers = GrpcServers(root, extra={"aclEnable": "true"})
    try:
        servers.start()
        create_topic(servers, TOPIC, signer=RemotingCredentials(*ADMIN))
        yield servers
    finally:
        servers.stop()


def test_v1_account_sends_and_receives_with_the_sdk(acl_v1: GrpcServers) -> None:
    config = ClientConfiguration(acl_v1.grpc_endpoint, Credentials(*CAROL), request_timeout=10)
    producer = Producer(config, (TOPIC,))
    producer.startup()
    try:
        msg = Message()
        msg.topic = TOPIC
        msg.body = b"v1 signed"
        sent = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, GROUP, {TOPIC: FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        got = []
        for _ in range(4):
            for message in consumer.receive(32, 15) or ():
                got.append(message.message_id)
                consumer.ack(message)
            if got:
                break
    finally:
        consumer.shutdown()
    assert got == [sent]


def test_v1_refusals(acl_v1: GrpcServers) -> None:
    wrong = _route(acl_v1, signed_metadata(CAROL[0], "not-carols"), TOPIC)
    assert wrong.status.code == Code.UNAUTHORIZED
    assert f"Check signature failed for accessKey={CAROL[0]}" in wrong.status.message
    unknown = _route(acl_v1, signed_metadata("stranger", "whatever1"), TOPIC)
    assert unknown.status.code == Code.UNAUTHORIZED and "No acl config for stranger" in unknown.status.message
    dave = signed_metadata(*DAVE)
    assert _route(acl_v1, dave, TOPIC).status.code == Code.OK  # SUB is enough for the route
    denied = _send(acl_v1, dave, TOPIC)
    assert denied.status.code == Code.UNAUTHORIZED
    assert f"No permission for topic:{TOPIC}" in denied.status.message
    assert _send(acl_v1, signed_metadata(*CAROL), TOPIC).status.code == Code.OK
