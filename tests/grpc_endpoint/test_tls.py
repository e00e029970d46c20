"""TLS on the gRPC port: with `tls.server.mode=enforcing` the port speaks TLS only, with the broker's certificate.

The official Python SDK (rocketmq-python-client 5.1.2, unchanged) with `tls_enable=True` verifies the server
against gRPC's default roots (`grpc.ssl_channel_credentials()` with no arguments). To make it trust the test CA
without changing it, the SDK runs in a subprocess whose environment sets GRPC_DEFAULT_SSL_ROOTS_FILE_PATH to the
CA file (grpc core reads that variable once, when the process first needs its roots, so it cannot be set inside
this test process). The certificate's key is encrypted, read with `tls.server.keyPassword` as the remoting port
reads it. Authentication is on too (the auth tests' keys): the SDK signs as the init SUPER user, and a wrong
secret over TLS gets UNAUTHORIZED. A plaintext client and a TLS client that does not trust the CA both fail at
the transport, and the port keeps serving.

The SDK also checks every host name it dials against the certificate, the brokers the route names included. With
`grpcRouteDomain` the route names a broker by a DNS name made from its address: here `pod.localhost`, so that
127.0.0.1 becomes `127-0-0-1.pod.localhost`, which gRPC's resolver (c-ares) answers with loopback as it answers
every name under `localhost` (RFC 6761), and which a certificate covers with the wildcard `*.pod.localhost`, as
Kubernetes' `*.<namespace>.pod` covers its pods.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import service_pb2, service_pb2_grpc

from broker.transport.tls import client_context
from tests.auth.auth_harness import ROOT, SECURED
from tests.grpc_endpoint.grpc_harness import GrpcServers, client_metadata, create_topic, enforcing_tls_keys, raw_channel
from tests.grpc_endpoint.test_auth import signed_metadata
from tests.tls_certs import LOCAL_HOSTS, Pki, make_pki

TOPIC = f"GrpcTlsTopic{uuid.uuid4().hex[:6]}"

# Sends 3 messages and receives them back, both over TLS; prints the ids sent and the bodies received as JSON.
SDK_SCRIPT = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, topic, group, ak, sk = sys.argv[1:6]
config = ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=10)
producer = Producer(config, (topic,), tls_enable=True)
producer.startup()
sent = []
try:
    for i in range(3):
        msg = Message()
        msg.topic = topic
        msg.body = f"over TLS #{i}".encode()
        sent.append(producer.send(msg).message_id)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5, tls_enable=True)
consumer.startup()
got = {}
try:
    deadline = time.monotonic() + 60
    while len(got) < len(sent) and time.monotonic() < deadline:
        for message in consumer.receive(32, 15) or ():
            got[message.message_id] = message.body.decode()
            consumer.ack(message)
finally:
    consumer.shutdown()
print("RESULT " + json.dumps({"sent": sent, "got": got}))
"""


def _secured(root: Path, hosts: tuple[str, ...] = LOCAL_HOSTS, **extra: str) -> Iterator[tuple[GrpcServers, Pki]]:
    """A NameServer and a broker with authentication on and TLS only, its certificate naming `hosts`; TOPIC made."""
    pki = make_pki(root / "pki")
    servers = GrpcServers(root, extra={**enforcing_tls_keys(pki, hosts), **SECURED, **extra})
    try:
        servers.start()
        # the remoting port is TLS-only too (enforcing): the admin client speaks TLS (not verifying: the
        # NameServer's certificate is its own self-signed one, and the remoting port is not what is tested here)
        create_topic(servers, TOPIC, signer=ROOT, tls=client_context(verify=False))
        yield servers, pki
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def tls_grpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GrpcServers, Pki]]:
    yield from _secured(tmp_path_factory.mktemp("grpc-tls"))


def _tls_route(
    servers: GrpcServers, pki: Pki, secret: str = ROOT.secret_key, endpoint: str | None = None
) -> service_pb2.QueryRouteResponse:
    credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca_cert.read_bytes())
    with grpc.secure_channel(endpoint or servers.grpc_endpoint, credentials) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.QueryRouteRequest()
        request.topic.name = TOPIC
        return stub.QueryRoute(request, metadata=signed_metadata(ROOT.access_key, secret), timeout=10)


def _sdk_roundtrip(endpoint: str, pki: Pki, cwd: Path) -> subprocess.CompletedProcess[str]:
    """SDK_SCRIPT in a process trusting `pki`'s CA, its home (the SDK's ~/logs) and working directory `cwd`."""
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki.ca_cert), "HOME": str(cwd)}
    group = f"GID-grpc-tls-{uuid.uuid4().hex[:6]}"
    return subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT, endpoint, TOPIC, group, ROOT.access_key, ROOT.secret_key],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def test_sdk_with_tls_enable_sends_and_receives(tls_grpc: tuple[GrpcServers, Pki], tmp_path: Path) -> None:
    servers, pki = tls_grpc
    done = _sdk_roundtrip(servers.grpc_endpoint, pki, tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"SDK over TLS failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(lines[-1][len("RESULT ") :])
    assert sorted(result["got"]) == sorted(result["sent"]) and len(result["sent"]) == 3
    assert sorted(result["got"].values()) == [f"over TLS #{i}" for i in range(3)]


def test_plaintext_client_fails_against_the_tls_port(tls_grpc: tuple[GrpcServers, Pki]) -> None:
    servers, pki = tls_grpc
    channel, stub = raw_channel(servers.grpc_endpoint)
    with channel:
        request = service_pb2.QueryRouteRequest()
        request.topic.name = TOPIC
        with pytest.raises(grpc.RpcError) as info:
            stub.QueryRoute(request, metadata=client_metadata(), timeout=5)
    # the server closes the plaintext HTTP/2 preface: the client sees the transport fail, not an answer
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value
    assert _tls_route(servers, pki).status.code == 20000  # and the port still serves TLS clients


def test_tls_client_not_trusting_the_ca_fails(tls_grpc: tuple[GrpcServers, Pki], tmp_path: Path) -> None:
    servers, pki = tls_grpc
    other = make_pki(tmp_path / "other", name="other-ca")
    credentials = grpc.ssl_channel_credentials(root_certificates=other.ca_cert.read_bytes())
    with grpc.secure_channel(servers.grpc_endpoint, credentials) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.QueryRouteRequest()
        request.topic.name = TOPIC
        with pytest.raises(grpc.RpcError) as info:
            stub.QueryRoute(request, metadata=client_metadata(), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value
    assert _tls_route(servers, pki).status.code == 20000


def test_wrong_secret_over_tls_gets_unauthorized(tls_grpc: tuple[GrpcServers, Pki]) -> None:
    servers, pki = tls_grpc
    reply = _tls_route(servers, pki, secret="not-roots-secret")
    assert reply.status.code == 40100 and "check signature failed" in reply.status.message
    assert _tls_route(servers, pki).status.code == 20000


ROUTE_DOMAIN = "pod.localhost"


@pytest.fixture(scope="module")
def routed_by_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GrpcServers, Pki]]:
    """A broker whose certificate names no address, only `localhost` and the route domain's wildcard."""
    root = tmp_path_factory.mktemp("grpc-tls-names")
    yield from _secured(root, ("localhost", f"*.{ROUTE_DOMAIN}"), grpcRouteDomain=ROUTE_DOMAIN)


def test_a_route_domain_names_the_broker_so_the_sdk_checking_host_names_reaches_it(
    routed_by_name: tuple[GrpcServers, Pki], tmp_path: Path
) -> None:
    servers, pki = routed_by_name
    endpoint = f"localhost:{servers.grpc_port}"
    route = _tls_route(servers, pki, endpoint=endpoint)
    hosts = {(a.host, a.port) for q in route.message_queues for a in q.broker.endpoints.addresses}
    assert hosts == {(f"127-0-0-1.{ROUTE_DOMAIN}", servers.grpc_port)}, route

    done = _sdk_roundtrip(endpoint, pki, tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"SDK over TLS failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(lines[-1][len("RESULT ") :])
    assert sorted(result["got"]) == sorted(result["sent"]) and len(result["sent"]) == 3


def test_the_sdk_refuses_an_address_the_certificate_does_not_name(
    routed_by_name: tuple[GrpcServers, Pki], tmp_path: Path
) -> None:
    """What the route domain is for: the same broker dialled by its IP fails the SDK's host name check."""
    servers, pki = routed_by_name
    done = _sdk_roundtrip(f"127.0.0.1:{servers.grpc_port}", pki, tmp_path)
    assert done.returncode != 0 and "RESULT " not in done.stdout
    log = (tmp_path / "logs" / "rocketmq_python" / "rocketmq_client.log").read_text(errors="replace")
    assert "Hostname Verification Check failed" in log, log[-3000:]
