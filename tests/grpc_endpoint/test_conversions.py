"""The endpoint's pure translations (broker.grpc.conversions, route, settings, receive.parse_handle): a gRPC message
to SEND_MESSAGE fields and back from a stored message, queue permissions, settings replies, receipt handles."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.client.route import BrokerData, QueueData, TopicRouteData
from broker.grpc.conversions import SendRefused, grpc_code, peer_address, to_grpc_message, to_send_request
from broker.grpc.receive import parse_handle
from broker.grpc.route import accept_types, message_queues, route_grpc_host, route_grpc_port
from broker.grpc.settings import settings_reply
from broker.protocol.codes import ResponseCode
from broker.protocol.message import MessageExt, SysFlag
from broker.protocol.properties import decode_properties

Code = definition_pb2.Code
NOW = 1_700_000_000_000


def _message(**system: object) -> definition_pb2.Message:
    msg = definition_pb2.Message()
    msg.topic.name = "T"
    msg.body = b"body"
    msg.user_properties["color"] = "blue"
    sp = msg.system_properties
    sp.message_id = "01ABC"
    sp.body_encoding = definition_pb2.Encoding.IDENTITY
    sp.tag = "TagA"
    sp.keys.extend(["k1", "k2"])
    sp.born_host = "10.0.0.7"
    sp.born_timestamp.seconds = NOW // 1000
    for key, value in system.items():
        if key == "delivery_ms":
            sp.delivery_timestamp.FromMilliseconds(int(value))  # type: ignore[call-overload]
        else:
            setattr(sp, key, value)
    return msg


def test_send_request_carries_every_field() -> None:
    request = to_send_request(_message(message_group="g1"), now_ms=NOW)
    props = decode_properties(request.ext_fields["properties"])
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["UNIQ_KEY"] == "01ABC"
    assert props["color"] == "blue" and props["__SHARDINGKEY"] == "g1" and props["PGROUP"] == "T"
    assert props["__BORNHOST"] == "10.0.0.7" and request.born_host == ("10.0.0.7", 0)
    assert request.ext_fields["bornTimestamp"] == str(NOW)
    assert request.body == b"body" and not request.transactional


def test_transaction_timer_and_gzip() -> None:
    msg = _message(
        message_type=definition_pb2.MessageType.TRANSACTION,
        delivery_ms=NOW + 5000,
        body_encoding=definition_pb2.Encoding.GZIP,
    )
    msg.body = gzip.compress(b"zipped")
    request = to_send_request(msg, now_ms=NOW)
    props = decode_properties(request.ext_fields["properties"])
    assert request.transactional and props["TRAN_MSG"] == "true"
    assert int(request.ext_fields["sysFlag"]) & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED_TYPE
    assert props["TIMER_DELIVER_MS"] == str(NOW + 5000)
    assert request.body == b"zipped"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"tag": " "}, Code.ILLEGAL_MESSAGE_TAG),
        ({"message_id": ""}, Code.ILLEGAL_MESSAGE_ID),
        ({"message_group": "x" * 64}, Code.ILLEGAL_MESSAGE_GROUP),
        ({"delivery_ms": NOW + 2 * 86_400_000}, Code.ILLEGAL_DELIVERY_TIME),
    ],
)
def test_send_refusals(change: dict[str, object], code: int) -> None:
    with pytest.raises(SendRefused) as info:
        to_send_request(_message(**change), now_ms=NOW)
    assert info.value.code == code


def test_reserved_property_and_bad_gzip() -> None:
    msg = _message()
    msg.user_properties["UNIQ_KEY"] = "x"
    with pytest.raises(SendRefused) as info:
        to_send_request(msg, now_ms=NOW)
    assert info.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    msg = _message(body_encoding=definition_pb2.Encoding.GZIP)
    with pytest.raises(SendRefused) as info:
        to_send_request(msg, now_ms=NOW)
    assert info.value.code == Code.MESSAGE_CORRUPTED


def test_stored_message_to_grpc() -> None:
    stored = MessageExt(
        topic="T",
        body=zlib.compress(b"hello"),
        properties={"TAGS": "TagA", "KEYS": "a b", "UNIQ_KEY": "ID1", "color": "blue", "__SHARDINGKEY": "g"},
        sys_flag=SysFlag.COMPRESSED,
        born_timestamp=NOW,
        born_host=("10.1.1.1", 4000),
        store_timestamp=NOW + 1,
        store_host=("10.2.2.2", 10911),
        queue_id=3,
        queue_offset=42,
        reconsume_times=2,
    )
    msg = to_grpc_message(stored, receipt_handle="h")
    sp = msg.system_properties
    assert msg.body == b"hello" and sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert sp.tag == "TagA" and list(sp.keys) == ["a", "b"] and sp.message_id == "ID1"
    assert dict(msg.user_properties) == {"color": "blue"}
    assert sp.message_type == definition_pb2.MessageType.FIFO and sp.message_group == "g"
    assert sp.born_host == "10.1.1.1" and sp.store_host == "10.2.2.2:10911"
    assert sp.born_timestamp.ToMilliseconds() == NOW and sp.queue_id == 3 and sp.queue_offset == 42
    assert sp.delivery_attempt == 3 and sp.receipt_handle == "h"


def test_codes_and_queues() -> None:
    assert grpc_code(ResponseCode.SUCCESS) == Code.OK
    assert grpc_code(ResponseCode.TOPIC_NOT_EXIST) == Code.TOPIC_NOT_FOUND
    assert grpc_code(12345) == Code.INTERNAL_SERVER_ERROR
    assert accept_types(None) == (definition_pb2.MessageType.NORMAL,)
    assert len(accept_types({"message.type": "MIXED"})) == 4
    route = TopicRouteData(
        (QueueData("b", read_queue_nums=4, write_queue_nums=2, perm=6),), (BrokerData("b", "c", {0: "1.2.3.4:10911"}),)
    )
    queues = message_queues("T", route, lambda addr: (addr.rpartition(":")[0], 8081), (1,))
    perms = [q.permission for q in queues]
    assert perms == [definition_pb2.Permission.READ] * 2 + [definition_pb2.Permission.READ_WRITE] * 2
    assert [q.id for q in queues] == [0, 1, 2, 3]
    assert queues[0].broker.endpoints.addresses[0].port == 8081
    assert queues[0].broker.endpoints.scheme == definition_pb2.AddressScheme.IPv4


def test_settings_reply_and_handles() -> None:
    settings = definition_pb2.Settings()
    settings.client_type = definition_pb2.ClientType.PRODUCER
    settings.publishing.topics.add().name = "T"
    reply = settings_reply(settings, max_body_size=1234)
    assert isinstance(reply, service_pb2.TelemetryCommand)
    assert reply.status.code == Code.OK and reply.settings.publishing.max_body_size == 1234
    assert reply.settings.backoff_policy.max_attempts == 3
    handle = parse_handle("5 1700000000000 60000 2 0 broker-a 3 7 123456")
    assert handle.info.queue_offset == 7 and handle.commit_log_offset == 123456
    assert handle.extra_info == "5 1700000000000 60000 2 0 broker-a 3 7"
    assert handle.expired(1700000060000) and not handle.expired(1700000059999)
    for bad in ("", "1 2 3", "a b c d e f g h i", "5 1 2 3 9 b 3 7 1"):
        with pytest.raises(ValueError):
            parse_handle(bad)


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:43560", ("127.0.0.1", 43560)),
        ("ipv6:[::1]:5000", ("::1", 5000)),
        ("ipv6:[::ffff:10.0.0.7]:5000", ("10.0.0.7", 5000)),
        ("ipv6:[fe80::1%eth0]:5000", ("fe80::1", 5000)),
        ("unix:/tmp/grpc.sock", None),
        ("ipv4:999.0.0.1:1", None),
        ("ipv4:127.0.0.1:99999", None),
        ("ipv6:[zz::1]:1", None),
        ("grpc", None),
        ("", None),
    ],
)
def test_peer_address(peer: str, address: tuple[str, int] | None) -> None:
    """The born host of a message whose client sent a host name (Java 5.x) is its connection's address."""
    assert peer_address(peer) == address


@pytest.mark.parametrize(
    ("addr", "offset", "want"),
    [
        ("10.0.0.5:10911", 0, 40001),  # this broker: the port its endpoint is bound to
        ("10.0.0.6:10911", 0, 8081),  # another broker: grpcServerPort, the same on every broker
        ("10.0.0.5:31201", 100, 31301),  # per-broker nodePorts: remoting port + offset, this broker too
        ("10.0.0.6:31206", 100, 31306),
        ("mq.example.com:31202", -5, 31197),
    ],
)
def test_route_grpc_port(addr: str, offset: int, want: int) -> None:
    got = route_grpc_port(addr, own_addr="10.0.0.5:10911", bound_port=40001, server_port=8081, offset=offset)
    assert got == want


@pytest.mark.parametrize("addr", ["10.0.0.5:65500", "10.0.0.5:nope", "10.0.0.5"])
def test_route_grpc_port_refuses_an_address_that_makes_no_port(addr: str) -> None:
    with pytest.raises(ValueError):
        route_grpc_port(addr, own_addr="x:1", bound_port=1, server_port=1, offset=100)


def test_a_broker_whose_grpc_port_cannot_be_named_is_left_out_of_the_route() -> None:
    route = TopicRouteData(
        (QueueData("a", 1, 1, 6), QueueData("b", 1, 1, 6)),
        (BrokerData("a", "c", {0: "1.2.3.4:31201"}), BrokerData("b", "c", {0: "1.2.3.5:65500"})),
    )

    def address_of(addr: str) -> tuple[str, int]:
        return addr.rpartition(":")[0], route_grpc_port(addr, own_addr="", bound_port=1, server_port=1, offset=100)

    queues = message_queues("T", route, address_of, (1,))
    assert [(q.broker.name, q.broker.endpoints.addresses[0].port) for q in queues] == [("a", 31301)]


@pytest.mark.parametrize(
    ("host", "domain", "want"),
    [
        ("10.244.1.7", "", "10.244.1.7"),  # no domain: the address the broker registered
        ("10.244.1.7", "orders.pod", "10-244-1-7.orders.pod"),  # Kubernetes' A record of a pod's address
        ("10.244.1.7", "orders.pod.cluster.local", "10-244-1-7.orders.pod.cluster.local"),
        ("fd00::7", "orders.pod", "fd00::7"),  # IPv6: left as it is
        ("mq.example.com", "orders.pod", "mq.example.com"),  # a name already
    ],
)
def test_route_grpc_host(host: str, domain: str, want: str) -> None:
    assert route_grpc_host(host, domain) == want


def test_a_route_domain_names_brokers_by_dns_so_the_sdk_dials_a_name() -> None:
    route = TopicRouteData(
        (QueueData("a", 2, 2, 6),), (BrokerData("a", "c", {0: "10.244.1.7:10911", 1: "10.244.2.9:10911"}),)
    )

    def address_of(addr: str) -> tuple[str, int]:
        return route_grpc_host(addr.rpartition(":")[0], "orders.pod"), 8081

    queues = message_queues("T", route, address_of, (1,))
    assert {(q.broker.endpoints.scheme, q.broker.endpoints.addresses[0].host) for q in queues} == {
        (definition_pb2.AddressScheme.DOMAIN_NAME, "10-244-1-7.orders.pod")
    }
