"""The C++ clients over TLS: not possible with the builds on PyPI, and this test says why (and turns into a failure
to look at, not a silent pass, if a new build gains it).

rocketmq-client-cpp has `setEnableSsl(true)` / `setSslPropertyFile(path)` since its 2.1 line (security.md 3.3),
but neither Python wrapper exposes them: rocketmq-python-cvs 2.1.0.3's `rocketmq.client` has no SSL call, and
the librocketmq.so it ships is built without SSL (no `EnableSsl` symbol, no OpenSSL linked); PyPI rocketmq
0.4.4 wraps the 1.x core, which has no TLS at all. A TLS-only (enforcing) broker cannot serve these clients;
permissive brokers serve them in plaintext, as tests/interop/test_roundtrip.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers import PEERS

pytestmark = pytest.mark.peers

CVS = "rocketmq-python-cvs-2.1.0.3"


def _package() -> Path:
    found = sorted(PEERS[CVS].prefix.glob("lib/python3*/site-packages/rocketmq"))
    if not found:
        pytest.skip(f"{CVS} is not installed (scripts/peers.sh)")
    return found[0]


def test_cpp_client_ssl_is_not_reachable_from_python() -> None:
    package = _package()
    wrapper = (package / "client.py").read_text() + (package / "ffi.py").read_text()
    library = (package / "librocketmq.so").read_bytes()
    exposed = "Ssl" in wrapper or "SSL" in wrapper
    built_in = b"EnableSsl" in library or b"SSL_CTX_new" in library
    if exposed or built_in:
        pytest.fail(f"{CVS} now has SSL (wrapper: {exposed}, library: {built_in}): write the TLS round trip here")
    pytest.skip(
        f"{CVS}: the Python wrapper exposes no SSL setting and its librocketmq.so is built without SSL "
        "(no EnableSsl, no OpenSSL): the C++ client cannot speak TLS from Python"
    )
