"""The pure parts of the gRPC endpoint's auth and TLS: the `authorization` metadata's parser, what each RPC needs
(RocketMQ's DefaultAuthorizationContextBuilder for gRPC messages), ACL 1.0's form of it, the peer's address, and
the gRPC port's TLS credentials from the broker's tls.* keys."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.auth.checker import AuthChecker, AuthSettings
from broker.auth.model import Action, AuthError, Resource
from broker.auth.plain import ANY, PUB, SUB, PlainAcl
from broker.auth.store import AuthStore
from broker.config.errors import ConfigError
from broker.grpc.auth import GrpcAuth, needs_of, parse_authorization, peer_ip, v1_needs
from broker.grpc.tls import grpc_tls_on, server_credentials
from broker.transport.tls import TlsSettings
from tests.tls_certs import make_pki

PUB_, SUB_ = (Action.PUB,), (Action.SUB,)


def _metadata(ak: str = "alice", sk: str = "secret-1", date_time: str = "20261129T101010Z") -> dict[str, str]:
    signature = hmac.new(sk.encode(), date_time.encode(), hashlib.sha1).hexdigest()
    header = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={signature}"
    return {"authorization": header, "x-mq-date-time": date_time}


def test_parse_reads_the_sdk_header_and_checks_the_secret() -> None:
    signed = parse_authorization(_metadata())
    assert signed.username == "alice" and signed.content == b"20261129T101010Z"
    assert signed.by("secret-1") and not signed.by("secret-2")
    # Credential may carry a scope after '/' (RocketMQ keeps what is before it)
    meta = _metadata()
    meta["authorization"] = meta["authorization"].replace("Credential=alice", "Credential=alice/20261129/x")
    assert parse_authorization(meta).username == "alice"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"authorization": ""}, "username cannot be null"),
        ({"x-mq-date-time": ""}, "datetime is null."),
        ({"x-mq-date-time": "2" * 65}, "datetime is incorrect"),
        ({"authorization": "x" * 1025}, "at most 1024"),
        ({"authorization": "MQv2-HMAC-SHA1"}, "authentication header is incorrect."),
        ({"authorization": "MQv2-HMAC-SHA1 Credential=, Signature=00"}, "username cannot be null."),
        ({"authorization": "MQv2-HMAC-SHA1 Credential=a, Signature=0g"}, "not hexadecimal"),
        ({"authorization": "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time"}, "sent no Signature"),
    ],
)
def test_parse_refuses_what_is_not_rocketmqs_form(change: dict[str, str], words: str) -> None:
    with pytest.raises(AuthError, match=words.replace("(", r"\(").replace(".", r"\.")):
        parse_authorization({**_metadata(), **change})


def _req(kind: str, **fields: Any) -> Any:
    request = getattr(service_pb2, kind)()
    for path, value in fields.items():
        target = request
        *parents, leaf = path.split("__")
        for name in parents:
            target = getattr(target, name)
        setattr(target, leaf, value)
    return request


def test_what_each_rpc_needs() -> None:
    send = service_pb2.SendMessageRequest()
    send.messages.add().topic.name = "T"
    assert needs_of(send) == [(Resource.topic("T"), PUB_)]
    assert needs_of(_req("EndTransactionRequest", topic__name="T")) == [(Resource.topic("T"), PUB_)]
    assert needs_of(_req("QueryRouteRequest", topic__name="T")) == [(Resource.topic("T"), (Action.PUB, Action.SUB))]
    group_and_topic = [(Resource.group("G"), SUB_), (Resource.topic("T"), SUB_)]
    for kind in ("AckMessageRequest", "ForwardMessageToDeadLetterQueueRequest", "QueryAssignmentRequest"):
        assert needs_of(_req(kind, group__name="G", topic__name="T")) == group_and_topic, kind
    receive = _req("ReceiveMessageRequest", group__name="G", message_queue__topic__name="T")
    assert needs_of(receive) == group_and_topic
    # as RocketMQ's proxy: ChangeInvisibleDuration checks the group only
    assert needs_of(_req("ChangeInvisibleDurationRequest", group__name="G", topic__name="T")) == [
        (Resource.group("G"), SUB_)
    ]
    consumer = _req("HeartbeatRequest", group__name="G", client_type=definition_pb2.ClientType.SIMPLE_CONSUMER)
    assert needs_of(consumer) == [(Resource.group("G"), SUB_)]
    assert needs_of(_req("HeartbeatRequest", client_type=definition_pb2.ClientType.PRODUCER)) == []
    assert needs_of(_req("NotifyClientTerminationRequest")) == []
    assert needs_of(_req("NotifyClientTerminationRequest", group__name="G")) == [(Resource.group("G"), SUB_)]


def test_what_telemetry_settings_need() -> None:
    producer = service_pb2.TelemetryCommand()
    producer.settings.publishing.topics.add().name = "A"
    producer.settings.publishing.topics.add().name = "B"
    assert needs_of(producer) == [(Resource.topic("A"), PUB_), (Resource.topic("B"), PUB_)]
    consumer = service_pb2.TelemetryCommand()
    consumer.settings.subscription.group.name = "G"
    consumer.settings.subscription.subscriptions.add().topic.name = "T"
    assert needs_of(consumer) == [(Resource.group("G"), SUB_), (Resource.topic("T"), SUB_)]
    neither = service_pb2.TelemetryCommand()
    neither.settings.client_type = definition_pb2.ClientType.PRODUCER
    with pytest.raises(AuthError, match=r"doesn't have publishing"):
        needs_of(neither)
    assert needs_of(service_pb2.TelemetryCommand()) == []  # not a settings command: authentication only


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (service_pb2.SendMessageRequest(), "message is null."),
        (_req("QueryRouteRequest"), "topic is null."),
        (_req("AckMessageRequest", topic__name="T"), "group is null."),
        (_req("ReceiveMessageRequest", group__name="G"), "messageQueue is null."),
    ],
)
def test_requests_without_their_resource_are_refused(request_: Any, words: str) -> None:
    with pytest.raises(AuthError, match=words.replace(".", r"\.")):
        needs_of(request_)


def test_v1_form_and_peer_address() -> None:
    needs = [
        (Resource.topic("T"), PUB_),
        (Resource.group("G"), SUB_),
        (Resource.topic("R"), (Action.PUB, Action.SUB)),
    ]
    assert v1_needs(needs) == {"T": PUB, "%RETRY%G": SUB, "R": ANY}
    assert peer_ip("ipv4:10.0.0.7:5123") == "10.0.0.7"
    assert peer_ip("ipv6:[::1]:5123") == "::1"
    assert peer_ip("unix:/tmp/socket") == "unix:/tmp/socket"


def test_tls_only_when_enforcing_and_credentials_name_the_bad_key(tmp_path: Path) -> None:
    assert grpc_tls_on(TlsSettings(mode="enforcing"))
    assert not grpc_tls_on(TlsSettings(mode="permissive")) and not grpc_tls_on(TlsSettings(mode="disabled"))
    pki = make_pki(tmp_path / "pki")
    cert, key = pki.issue("broker", key_password="pw-123456")
    assert server_credentials(
        TlsSettings(server_cert_path=str(cert), server_key_path=str(key), server_key_password="pw-123456")
    )
    assert server_credentials(TlsSettings(test_mode=True))  # self-signed
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPath"):
        server_credentials(TlsSettings(server_cert_path=str(cert), server_key_path=str(key), server_key_password="no"))
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath"):
        server_credentials(TlsSettings(server_cert_path=str(tmp_path / "absent.crt"), server_key_path=str(key)))
    with pytest.raises(ConfigError, match=r"tls\.server\.trustCertPath"):
        server_credentials(TlsSettings(test_mode=True, need_client_auth="require"))
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath and tls\.server\.keyPath"):
        server_credentials(TlsSettings(test_mode=False))


def test_v1_global_whitelist_needs_no_signature(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(
        "globalWhiteRemoteAddresses: ['10.0.0.*']\naccounts:\n  - accessKey: carol-v1\n    secretKey: carol-secret\n"
    )
    plain = PlainAcl(tmp_path)
    assert plain.load()
    auth = GrpcAuth(AuthChecker(AuthSettings(), AuthStore(None)), plain)
    route = _req("QueryRouteRequest", topic__name="T")
    assert auth.refusal({}, route, "ipv4:10.0.0.5:4000") is None
    assert "No accessKey is configured" in (auth.refusal({}, route, "ipv4:10.0.1.5:4000") or "")
    assert "No default permission for topic:T" in (
        auth.refusal(_metadata("carol-v1", "carol-secret"), route, "ipv4:10.0.1.5:1") or ""
    )
    assert auth.refused == 2
