"""Apache RocketMQ's Java client 5.3.3 (unchanged) over TLS against our NameServer and broker in enforcing mode.

The client's TLS switches are its own system properties (security.md 3.3): `-Dtls.enable=true` is the default
of ClientConfig.useTLS (so every DefaultMQProducer/PushConsumer of the JVM has setUseTLS(true)), and with
`tls.test.mode.enable=false`, `tls.client.authServer=true` and `tls.client.trustCertPath` it verifies our
certificate against the test CA. One JVM sends and consumes over TLS; a plaintext JVM is refused with the
server's "TLS connections only" answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.interop_harness import TlsServerPair, create_tls_topic, enforcing_servers, home_for
from tests.interop.java_harness import check_intact, client_log_lines, ensure_java, java

pytestmark = pytest.mark.peers

COUNT = 10


@pytest.fixture(scope="module")
def tls_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsServerPair, Path]]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    pair, ca = enforcing_servers(tmp_path_factory.mktemp("java-tls"))
    try:
        pair.start()
        yield pair, ca
    finally:
        pair.stop()


def test_java_client_sends_and_consumes_over_tls(tls_servers: tuple[TlsServerPair, Path]) -> None:
    servers, ca = tls_servers
    topic = "JavaTlsTopic"
    create_tls_topic(servers.namesrv_addr, ca, topic)
    props = {
        "tls.enable": "true",  # ClientConfig.useTLS's default: setUseTLS(true) for every client of the JVM
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(ca),
    }
    args = ["consume", "--namesrv", servers.namesrv_addr, "--group", "CID-java-tls", "--topic", topic,
            "--send-count", str(COUNT), "--origin", "javatls", "--expect", str(COUNT), "--linger", "1",
            "--timeout", "60"]  # fmt: skip
    run = java(args, home_for(servers.root, "java-tls"), timeout=80, props=props).start().wait()
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert Counter(r.seq for r in got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "javatls")


def test_java_plaintext_client_is_refused_by_an_enforcing_server(tls_servers: tuple[TlsServerPair, Path]) -> None:
    servers, _ca = tls_servers
    home = home_for(servers.root, "java-plain")
    args = ["produce", "--namesrv", servers.namesrv_addr, "--send", "sync:JavaTlsTopic", "--count", "1",
            "--timeout", "30"]  # fmt: skip
    run = java(args, home, timeout=60).start().wait()
    assert not run.of("sent"), run.describe()
    said = "\n".join([str(e) for e in run.of("send_error")] + client_log_lines(home) + [run.stderr])
    assert "TLS connections only" in said, run.describe()
