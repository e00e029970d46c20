"""mqadmin's TLS flags against a NameServer and broker (mqnamesrv / mqbroker processes) in enforcing mode: --tls
with --tls-ca lists the cluster and sends a message, --tls-insecure skips verification, and without --tls the
command fails with the server's answer saying TLS is required."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cli.mqadmin.main import main
from tests.interop.interop_harness import BROKER_NAME, TlsServerPair, enforcing_servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsServerPair, Path]]:
    pair, ca = enforcing_servers(tmp_path_factory.mktemp("mqadmin-tls"))
    try:
        pair.start()
        yield pair, ca
    finally:
        pair.stop()


def test_mqadmin_over_tls(servers: tuple[TlsServerPair, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pair, ca = servers
    tls = ["-n", pair.namesrv_addr, "--tls", "--tls-ca", str(ca)]
    assert main(["clusterList", *tls]) == 0
    assert BROKER_NAME in capsys.readouterr().out
    assert main(["updateTopic", *tls, "-b", pair.broker_addr, "-t", "AdminTls"]) == 0
    assert main(["sendMessage", *tls, "-t", "AdminTls", "-p", "over tls"]) == 0
    assert "SEND_OK" in capsys.readouterr().out
    assert main(["clusterList", "-n", pair.namesrv_addr, "--tls-insecure"]) == 0


def test_mqadmin_without_tls_is_told_why(
    servers: tuple[TlsServerPair, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pair, _ca = servers
    assert main(["clusterList", "-n", pair.namesrv_addr]) == 1
    assert "TLS connections only" in capsys.readouterr().err
