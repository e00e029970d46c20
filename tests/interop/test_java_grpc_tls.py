"""Apache RocketMQ's Java 5.x gRPC client (rocketmq-client-java 5.0.8 from Maven Central, unchanged) against our
broker's gRPC endpoint with `tls.server.mode=enforcing`, where the gRPC port speaks TLS only.

The broker serves a certificate of a test CA (its key encrypted, read with `tls.server.keyPassword`), as
tests/grpc_endpoint/test_tls.py sets it up for the Python SDK. The Java client with `enableSsl(true)` (its
default, which trusts any certificate) sends through the route QueryRoute gives and a SimpleConsumer receives and
acks every message, field by field. The same client with `enableSsl(false)` fails to start with the transport's
error, and the port keeps serving TLS clients.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.grpc_protocol", reason="the gRPC endpoint needs the `grpc` extra")

import grpc
from rocketmq.grpc_protocol import service_pb2, service_pb2_grpc

from broker.transport.tls import client_context
from tests.grpc_endpoint.grpc_harness import GrpcServers, client_metadata, create_topic, enforcing_tls_keys
from tests.interop.interop_harness import Record, fields, home_for
from tests.interop.java_grpc_harness import ensure_java_grpc, grpc5
from tests.tls_certs import Pki, make_pki

pytestmark = pytest.mark.peers

ORIGIN = "java5tls"
TOPIC = "J5TlsNormal"
REFUSED_TOPIC = "J5TlsRefused"
COUNT = 5


@pytest.fixture(scope="module")
def tls_grpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GrpcServers, Pki]]:
    problem = ensure_java_grpc()
    if problem is not None:
        pytest.skip(f"rocketmq-client-java cannot be installed here: {problem}")
    root = tmp_path_factory.mktemp("java-grpc-tls")
    pki = make_pki(root / "pki")
    keys = enforcing_tls_keys(pki)
    servers = GrpcServers(root, extra=keys)
    try:
        servers.start()
        # the remoting port is TLS-only too: the admin client speaks TLS (not verifying, not what is tested here)
        for topic in (TOPIC, REFUSED_TOPIC):
            create_topic(servers, topic, tls=client_context(verify=False))
        yield servers, pki
    finally:
        servers.stop()


def _tls_route(servers: GrpcServers, pki: Pki) -> service_pb2.QueryRouteResponse:
    """QueryRoute over a TLS channel that verifies the broker's certificate (the port is serving)."""
    credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca_cert.read_bytes())
    with grpc.secure_channel(servers.grpc_endpoint, credentials) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.QueryRouteRequest()
        request.topic.name = TOPIC
        reply: service_pb2.QueryRouteResponse = stub.QueryRoute(request, metadata=client_metadata(), timeout=10)
        return reply


def test_java_sdk_with_ssl_sends_and_a_simple_consumer_receives(
    tls_grpc: tuple[GrpcServers, Pki], tmp_path: Path
) -> None:
    servers, _pki = tls_grpc
    endpoint = f"tls:{servers.grpc_endpoint}"
    producer = grpc5(["produce", endpoint, ORIGIN, f"{TOPIC}:normal:{COUNT}"], home_for(tmp_path, "producer"))
    producer.start().wait()
    assert producer.returncode == 0 and not producer.of("error"), producer.describe()
    sent = {int(e["seq"]): e["message_id"] for e in producer.of("sent")}
    assert sorted(sent) == list(range(COUNT)), producer.describe()

    args = ["simple", endpoint, "J5-tls-simple", str(COUNT), "60", TOPIC]
    consumer = grpc5(args, home_for(tmp_path, "simple")).start().wait()
    assert consumer.returncode == 0 and not consumer.of("error"), consumer.describe()
    got = [e for e in consumer.of("msg") if e["stage"] == "simple"]
    assert sorted(int(e["props"]["seq"]) for e in got) == list(range(COUNT)), consumer.describe()
    for event in got:
        record = Record.from_event(event)
        want = fields(ORIGIN, TOPIC, record.seq)
        assert (record.body, record.tags, record.keys) == (want["body"].encode(), want["tags"], want["keys"])
        assert record.props == want["props"], record
        assert record.id == sent[record.seq]
    # every message was acked: the receive after the last one got nothing back
    assert not [e for e in consumer.of("msg") if e["stage"] != "simple"], consumer.describe()


def test_java_sdk_without_ssl_is_refused_and_the_port_keeps_serving(
    tls_grpc: tuple[GrpcServers, Pki], tmp_path: Path
) -> None:
    servers, pki = tls_grpc
    args = ["produce", servers.grpc_endpoint, ORIGIN, f"{REFUSED_TOPIC}:normal:1"]
    producer = grpc5(args, home_for(tmp_path, "plaintext"), timeout=90).start().wait()
    # the client fails by itself (not killed by the run's timeout, 124), having sent nothing
    assert producer.returncode not in (0, 124), producer.describe()
    assert not producer.of("sent"), producer.describe()
    assert "UNAVAILABLE" in producer.stderr, producer.describe()
    assert _tls_route(servers, pki).status.code == 20000
