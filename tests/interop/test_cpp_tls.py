"""The C++ clients over TLS: not possible with the builds on PyPI. This test says why, from the installed
library itself, and turns into a failure to look at (not a silent pass) if a new build gains it.

rocketmq-client-cpp got TLS in 2.2.0, as C++ calls only (`DefaultMQProducer::setEnableSsl`,
`setSslPropertyFile`); the C calls a ctypes wrapper could use (`SetProducerSsl`, `SetPushConsumerSsl`, ...)
exist only on its master since 2025-08, in no release. rocketmq-python-cvs 2.1.0.3 ships a 2.1.0 core built
without OpenSSL, and PyPI rocketmq 0.4.4 wraps the 1.x core, which never had TLS. A TLS-only (enforcing) server
cannot serve them; a permissive one serves them in plaintext, as tests/interop/test_roundtrip.py does.
docs/compatibility.md (note 16) has the evidence: symbols, version banner, upstream commits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers import PEERS

pytestmark = pytest.mark.peers

CVS = "rocketmq-python-cvs-2.1.0.3"

# Names whose presence in librocketmq.so would mean TLS is reachable: the C API calls (usable through ctypes),
# the C++ setter (mangled, so matched as a substring), and what a TLS build links in (OpenSSL, libevent's
# OpenSSL bufferevent).
_C_API = (b"SetProducerSsl", b"SetPushConsumerSsl", b"SetPullConsumerSsl")
_BUILT_IN = (b"setEnableSsl", b"SSL_CTX_new", b"bufferevent_openssl_socket_new")


def _package() -> Path:
    found = sorted(PEERS[CVS].prefix.glob("lib/python3*/site-packages/rocketmq"))
    if not found:
        pytest.skip(f"{CVS} is not installed (scripts/peers.sh)")
    return found[0]


def test_cpp_client_ssl_is_not_reachable_from_python() -> None:
    package = _package()
    wrapper = (package / "client.py").read_text() + (package / "ffi.py").read_text()
    library = (package / "librocketmq.so").read_bytes()
    assert b"CPP CORE VERSION: 2.1.0" in library, "a different core than the one docs/compatibility.md describes"
    exposed = "Ssl" in wrapper or "SSL" in wrapper
    c_api = [name.decode() for name in _C_API if name in library]
    built_in = [name.decode() for name in _BUILT_IN if name in library]
    if exposed or c_api or built_in:
        pytest.fail(
            f"{CVS} now has SSL (wrapper: {exposed}, C API: {c_api}, library: {built_in}): "
            "write the TLS round trip here (ctypes on SetProducerSsl if the wrapper lacks it)"
        )
    pytest.skip(
        f"{CVS}: core 2.1.0 built without SSL (no SetProducerSsl, no setEnableSsl, no OpenSSL) and a wrapper "
        "with no SSL setting: the C++ client cannot speak TLS (docs/compatibility.md, note 16)"
    )
