"""The C++ client over TLS: rocketmq-python-cvs's wrapper on a core built with TLS, against our enforcing servers.

No published build of the C++ client has TLS (docs/compatibility.md, note 16): rocketmq-python-cvs 2.1.0.3 ships a
2.1.0 core built without OpenSSL, and the C calls a wrapper can reach (`SetProducerSsl`, `SetPushConsumerSsl` and
their property-file calls) exist only on rocketmq-client-cpp's main branch. scripts/cpp-client-ssl.sh builds that
branch with Debian's OpenSSL and libevent. Here the cvs wheel's own Python wrapper runs unchanged on that library
(the same C API, plus the SSL calls, reached through ctypes by tests/peers/py/interop.py): it sends and consumes
over TLS, verifying our certificate against the test CA, and fails to connect when the CA it trusts did not sign
our certificate. The wheel's own core, plaintext only, is refused by the same servers.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.interop_harness import (
    PeerProc,
    TlsServerPair,
    check_intact,
    create_tls_topic,
    enforcing_servers,
    home_for,
)
from tests.peers import PEERS
from tests.tls_certs import make_pki

pytestmark = pytest.mark.peers

CVS = "rocketmq-python-cvs-2.1.0.3"
COUNT = 10
BUILDS = Path.home() / ".cache" / "rocketcluster"

# Names whose presence in the wheel's librocketmq.so would mean it has TLS of its own: the C API calls, the C++
# setter (mangled, so matched as a substring), and what a TLS build links in.
_SSL_NAMES = (b"SetProducerSsl", b"SetPushConsumerSsl", b"setEnableSsl", b"SSL_CTX_new", b"bufferevent_openssl")


def _wheel_package() -> Path:
    found = sorted(PEERS[CVS].prefix.glob("lib/python3*/site-packages/rocketmq"))
    if not found:
        pytest.skip(f"{CVS} is not installed (scripts/peers.sh)")
    return found[0]


def _ssl_core() -> Path:
    built = sorted(BUILDS.glob("rocketmq-client-cpp-*/.ok"), key=lambda stamp: stamp.stat().st_mtime)
    if not built:
        pytest.skip(
            "no rocketmq-client-cpp built with TLS in ~/.cache/rocketcluster: run "
            "`make cpp-client-ssl ROCKETMQ_CPP_SRC=<a clone of apache/rocketmq-client-cpp>` (a few minutes)"
        )
    return built[-1].parent / "librocketmq.so"


def test_the_wheels_own_core_has_no_tls() -> None:
    """Why the TLS tests below need a core of their own: the wheel's has none (if a new wheel gains it, this fails
    and the source build can go)."""
    package = _wheel_package()
    library = (package / "librocketmq.so").read_bytes()
    wrapper = (package / "client.py").read_text() + (package / "ffi.py").read_text()
    assert b"CPP CORE VERSION: 2.1.0" in library
    assert [name.decode() for name in _SSL_NAMES if name in library] == []
    assert "Ssl" not in wrapper and "SSL" not in wrapper


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsServerPair, Path, Path]]:
    """Enforcing NameServer and broker, the test CA, and the wheel's wrapper on the TLS core (a directory to put
    first on PYTHONPATH)."""
    wheel = _wheel_package()
    core = _ssl_core()
    root = tmp_path_factory.mktemp("cpp-tls")
    wrapper = root / "wrapper"
    shutil.copytree(wheel, wrapper / "rocketmq", ignore=shutil.ignore_patterns("__pycache__", "librocketmq.so"))
    shutil.copy(core, wrapper / "rocketmq" / "librocketmq.so")
    pair, ca = enforcing_servers(root)
    try:
        pair.start()
        yield pair, ca, wrapper
    finally:
        pair.stop()


def _properties(path: Path, trusted_ca: Path) -> Path:
    # the C++ client's keys (EventLoop::CreateSslContext): it checks the server's chain against trustCertPath
    path.write_text(f"tls.client.authServer=true\ntls.client.trustCertPath={trusted_ca}\n")
    return path


def _tls_client(servers: TlsServerPair, wrapper: Path, name: str, args: list[str], props: Path) -> PeerProc:
    args = [*args, "--ssl-properties", str(props)]
    return PeerProc(CVS, args, home_for(servers.root, name), timeout=60, extra_env={"PYTHONPATH": str(wrapper)})


def _namesrv_log(pair: TlsServerPair) -> str:
    return (pair.root / "mqnamesrv.log").read_text(errors="replace")


def test_cpp_client_sends_and_consumes_over_tls(servers: tuple[TlsServerPair, Path, Path]) -> None:
    pair, ca, wrapper = servers
    topic = "CppTlsTopic"
    create_tls_topic(pair.namesrv_addr, ca, topic)
    props = _properties(pair.root / "tls.properties", ca)
    produce = ["produce", "--namesrv", pair.namesrv_addr, "--group", "PID-cpp-tls", "--origin", "cpptls",
               "--send", f"sync:{topic}", "--count", str(COUNT)]  # fmt: skip
    sent = _tls_client(pair, wrapper, "cpp-tls-produce", produce, props).start().wait()
    assert sent.returncode == 0, sent.describe()
    assert [e["status"] for e in sent.of("sent")] == [0] * COUNT, sent.describe()  # SEND_OK each
    consume = ["consume", "--namesrv", pair.namesrv_addr, "--group", "CID-cpp-tls", "--topic", topic,
               "--expect", str(COUNT), "--timeout", "40"]  # fmt: skip
    got = _tls_client(pair, wrapper, "cpp-tls-consume", consume, props).start().wait()
    assert got.returncode == 0, got.describe()
    records = got.records()
    assert Counter(r.seq for r in records) == Counter(range(COUNT)), got.describe()
    for record in records:
        check_intact(record, "cpptls")


def test_cpp_client_refuses_a_server_its_ca_did_not_sign(servers: tuple[TlsServerPair, Path, Path]) -> None:
    pair, _ca, wrapper = servers
    stranger = make_pki(pair.root / "other-pki")
    props = _properties(pair.root / "stranger.properties", stranger.ca_cert)
    args = ["produce", "--namesrv", pair.namesrv_addr, "--group", "PID-cpp-stranger", "--send", "sync:CppTlsTopic",
            "--count", "1"]  # fmt: skip
    run = _tls_client(pair, wrapper, "cpp-tls-stranger", args, props).start().wait()
    assert not run.of("sent"), run.describe()
    assert run.of("send_error"), run.describe()
    # the client gave up in the handshake, on our certificate: the NameServer saw it abort, not a plaintext hello
    assert "TLS handshake with" in _namesrv_log(pair), run.describe()


def test_cpp_client_without_tls_is_refused_by_an_enforcing_server(servers: tuple[TlsServerPair, Path, Path]) -> None:
    pair, _ca, _wrapper = servers
    args = ["produce", "--namesrv", pair.namesrv_addr, "--group", "PID-cpp-plain", "--send", "sync:CppTlsTopic",
            "--count", "1"]  # fmt: skip
    run = PeerProc(CVS, args, home_for(pair.root, "cpp-plain"), timeout=60).start().wait()
    assert not run.of("sent"), run.describe()
    assert run.of("send_error"), run.describe()
    assert "refused a plaintext connection" in _namesrv_log(pair), run.describe()
