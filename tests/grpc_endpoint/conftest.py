"""Fixtures of the gRPC endpoint tests: one NameServer + broker subprocess pair with the endpoint on, for the
session (every test uses its own topics and groups). The broker.conf entries make an orphaned transaction's check
come within about 2 s, and keep redelivery steps short."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("rocketmq", reason="the gRPC endpoint needs the `grpc` extra (rocketmq-python-client)")

from tests.grpc_endpoint.grpc_harness import GrpcServers
from tests.peers.python_sdk import sdk_loop_for_threads_without_one

GRPC_BROKER_CONF = {
    "transactionTimeOut": "1000",
    "transactionCheckInterval": "1000",
    "enablePropertyFilter": "true",  # SQL92 subscriptions
    # a small inbound bound, so that the oversized-request test need not build 130 MiB
    "grpcMaxInboundMessageSize": str(8 << 20),
}


@pytest.fixture(scope="session")
def grpc_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServers]:
    pair = GrpcServers(tmp_path_factory.mktemp("grpc"), extra=GRPC_BROKER_CONF)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="package", autouse=True)
def _sdk_loop_for_threads_without_one() -> Iterator[None]:
    with sdk_loop_for_threads_without_one():
        yield
