"""TLS on the remoting port: one port for both by the first byte, the three modes, client verification, mTLS,
hostile handshakes, the idle rule before the first byte, and certificate reload, over real TCP and real files."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from pathlib import Path

import pytest

from broker.config.errors import ConfigError
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import ConnectError, RemotingConnection, RemotingServer, connect
from broker.transport.listener import TLS_REQUIRED_REMARK
from broker.transport.tls import ServerTls, TlsKeys, TlsSettings, client_context, with_tls_file
from tests.tls_certs import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def _settings(pki: Pki | None = None, **changes: object) -> TlsSettings:
    values: dict[str, object] = {"test_mode": False, "reload_interval": 0.0}
    if pki is not None:
        cert, key = pki.issue("server")
        values.update(server_cert_path=str(cert), server_key_path=str(key))
    values.update(changes)
    return TlsSettings(**values)  # type: ignore[arg-type]


async def _server(settings: TlsSettings | None, **kwargs: object) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, tls=ServerTls(settings) if settings else None, **kwargs)  # type: ignore[arg-type]

    def echo(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=cmd.body)

    server.register(1, echo)
    await server.start()
    return server


async def _echo(conn: RemotingConnection, body: bytes = b"ping") -> RemotingCommand:
    return await conn.invoke(RemotingCommand(code=1, body=body), 5)


def _ca_client(pki: Pki, **kwargs: object) -> ssl.SSLContext:
    return client_context(ca_file=str(pki.ca_cert), **kwargs)  # type: ignore[arg-type]


async def test_permissive_serves_tls_and_plaintext_on_one_port(pki: Pki) -> None:
    server = await _server(_settings(pki))
    tls_conn = await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    plain_conn = await connect(("127.0.0.1", server.port))
    assert (await _echo(tls_conn, b"over tls")).body == b"over tls"
    assert (await _echo(plain_conn, b"plain")).body == b"plain"
    assert tls_conn.transport is not None and tls_conn.transport.get_extra_info("ssl_object") is not None
    assert plain_conn.transport is not None and plain_conn.transport.get_extra_info("ssl_object") is None
    # a large body crosses many TLS records both ways
    big = os.urandom(3 * 1024 * 1024)
    assert (await _echo(tls_conn, big)).body == big
    tls_conn.close()
    plain_conn.close()
    await server.shutdown()


async def test_enforcing_refuses_plaintext_with_a_clear_error_and_serves_tls(pki: Pki) -> None:
    server = await _server(_settings(pki, mode="enforcing"))
    plain = await connect(("127.0.0.1", server.port))
    started = time.monotonic()
    response = await _echo(plain)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == TLS_REQUIRED_REMARK
    await asyncio.wait_for(plain.closed, 5)
    assert time.monotonic() - started < 2  # an answer and a close, not a hang
    tls_conn = await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    assert (await _echo(tls_conn)).code == ResponseCode.SUCCESS
    assert server._listener is not None and server._listener.refused == 1
    await server.shutdown()


async def test_disabled_refuses_tls_and_serves_plaintext(pki: Pki) -> None:
    server = await _server(_settings(pki, mode="disabled"))
    with pytest.raises(ConnectError, match=r"TLS handshake with .* failed"):
        await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    plain = await connect(("127.0.0.1", server.port))
    assert (await _echo(plain)).code == ResponseCode.SUCCESS
    await server.shutdown()


async def test_client_refuses_a_wrong_host_an_expired_and_an_unknown_certificate(pki: Pki, tmp_path: Path) -> None:
    cert, key = pki.issue("elsewhere", ("broker.example.com",))
    server = await _server(_settings(server_cert_path=str(cert), server_key_path=str(key)))
    with pytest.raises(ConnectError, match=r"(?i)hostname mismatch|doesn't match|IP address mismatch"):
        await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    # the explicit opt-outs: no host name check, or no verification at all
    assert (await _echo(await connect(("127.0.0.1", server.port), tls=_ca_client(pki, check_hostname=False)))).code == 0
    assert (await _echo(await connect(("127.0.0.1", server.port), tls=client_context(verify=False)))).code == 0
    await server.shutdown()

    cert, key = pki.issue("old", expired=True)
    server = await _server(_settings(server_cert_path=str(cert), server_key_path=str(key)))
    with pytest.raises(ConnectError, match="certificate has expired"):
        await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    await server.shutdown()

    other = make_pki(tmp_path / "other", "other-ca")
    server = await _server(_settings(other))
    with pytest.raises(ConnectError, match=r"unable to get local issuer certificate|self.signed"):
        await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    # the server kept serving through all of that
    assert (await _echo(await connect(("127.0.0.1", server.port)))).code == 0
    await server.shutdown()


async def test_mutual_tls_requires_a_trusted_unexpired_client_certificate(pki: Pki, tmp_path: Path) -> None:
    settings = _settings(
        pki, need_client_auth="require", server_auth_client=True, server_trust_cert_path=str(pki.ca_cert)
    )
    server = await _server(settings)
    addr = ("127.0.0.1", server.port)
    cert, key = pki.issue("client", client=True, key_password="s3cret")
    conn = await connect(addr, tls=_ca_client(pki, cert_file=str(cert), key_file=str(key), key_password="s3cret"))
    assert (await _echo(conn)).code == 0

    async def refused(ctx: ssl.SSLContext) -> None:
        # TLS 1.3: the client finishes its side before the server checks its certificate, so the refusal shows
        # on the first request or at connect
        try:
            conn = await connect(addr, tls=ctx)
        except ConnectError:
            return
        with pytest.raises(Exception):  # noqa: B017 - closed connection or reset, either way no answer
            await _echo(conn)

    await refused(_ca_client(pki))  # no certificate
    old_cert, old_key = pki.issue("old-client", client=True, expired=True)
    await refused(_ca_client(pki, cert_file=str(old_cert), key_file=str(old_key)))
    stranger = make_pki(tmp_path / "stranger", "stranger-ca")
    s_cert, s_key = stranger.issue("client", client=True)
    await refused(_ca_client(pki, cert_file=str(s_cert), key_file=str(s_key)))
    assert (await _echo(conn)).code == 0  # the good client was never disturbed
    await server.shutdown()


def test_client_auth_without_a_trust_file_is_a_config_error(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"tls\.server\.trustCertPath"):
        ServerTls(_settings(pki, need_client_auth="require"))
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath"):
        ServerTls(_settings(server_cert_path="/nonexistent/cert.pem", server_key_path="/nonexistent/key.pem"))


async def test_test_mode_makes_a_self_signed_certificate_when_none_is_given() -> None:
    server = await _server(TlsSettings(test_mode=True, reload_interval=0))
    conn = await connect(("127.0.0.1", server.port), tls=client_context(verify=False))
    assert (await _echo(conn)).code == 0
    with pytest.raises(ConnectError, match="certificate is refused"):
        await connect(("127.0.0.1", server.port), tls=client_context())
    await server.shutdown()
    # no certificate and no test mode: TLS connections are refused, plaintext served
    server = await _server(TlsSettings(test_mode=False, reload_interval=0))
    with pytest.raises(ConnectError):
        await connect(("127.0.0.1", server.port), tls=client_context(verify=False))
    assert (await _echo(await connect(("127.0.0.1", server.port)))).code == 0
    await server.shutdown()


async def _raw(port: int, data: bytes = b"") -> socket.socket:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    if data:
        await loop.sock_sendall(sock, data)
    return sock


async def _closed_by_server(sock: socket.socket, within: float) -> float:
    """Seconds until the server closed `sock` (EOF or reset)."""
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    while True:
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 4096), within)
        except ConnectionError:
            break
        if not data:
            break
    sock.close()
    return time.monotonic() - started


async def test_stalled_handshakes_are_dropped_and_bounded_while_others_are_served(pki: Pki, caplog) -> None:
    caplog.set_level(logging.INFO, logger="broker.transport")
    server = await _server(_settings(pki, handshake_timeout=0.6, max_handshakes=3))
    port = server.port
    # three handshakes that never finish (a record header and nothing more) hold every slot
    stalled = [await _raw(port, b"\x16\x03\x01") for _ in range(3)]
    await asyncio.sleep(0.1)
    assert server._listener is not None and server._listener.handshaking == 3
    # a fourth TLS peer is closed at once; plaintext peers are not held up
    extra = await _raw(port, b"\x16\x03\x01\x00\x10")
    assert await _closed_by_server(extra, 2) < 0.5
    assert (await _echo(await connect(("127.0.0.1", port)))).code == 0
    # the stalled ones go after the handshake timeout, and TLS is served again
    waits = await asyncio.gather(*(_closed_by_server(s, 3) for s in stalled))
    assert all(wait < 1.5 for wait in waits)
    assert server._listener.handshaking == 0
    assert (await _echo(await connect(("127.0.0.1", port), tls=_ca_client(pki)))).code == 0
    assert any("handshakes already in progress" in r.getMessage() for r in caplog.records)
    await server.shutdown()


async def test_garbage_after_the_handshake_byte_closes_that_connection_only(pki: Pki) -> None:
    server = await _server(_settings(pki))
    good = await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    for junk in (b"\x16" + os.urandom(300), b"\x16\x03\x03\x00\x05hello", b"\x16GET / HTTP/1.1\r\n\r\n"):
        sock = await _raw(server.port, junk)
        assert await _closed_by_server(sock, 3) < 2
    assert (await _echo(good)).code == 0
    assert (await _echo(await connect(("127.0.0.1", server.port), tls=_ca_client(pki)))).code == 0
    await server.shutdown()


async def test_a_silent_connection_is_closed_after_the_idle_timeout(pki: Pki) -> None:
    server = await _server(_settings(pki), idle_timeout=0.5)
    silent = await _raw(server.port)
    assert 0.3 < await _closed_by_server(silent, 3) < 2
    # one that spoke TLS and then went quiet is a connection like any other: the idle scan closes it
    conn = await connect(("127.0.0.1", server.port), tls=_ca_client(pki))
    assert (await _echo(conn)).code == 0
    await asyncio.wait_for(conn.closed, 3)
    await server.shutdown()


async def test_certificates_reload_trust_at_once_cert_and_key_only_together(pki: Pki, tmp_path: Path) -> None:
    cert, key = pki.issue("server")
    trust = tmp_path / "trust.pem"
    trust.write_bytes(pki.ca_cert.read_bytes())
    tls = ServerTls(
        _settings(server_cert_path=str(cert), server_key_path=str(key), server_trust_cert_path=str(trust),
                  need_client_auth="optional", reload_interval=0.1)
    )  # fmt: skip
    server = RemotingServer("127.0.0.1", 0, tls=tls)
    server.register(1, lambda conn, cmd: cmd.response(ResponseCode.SUCCESS))
    await server.start()
    addr = ("127.0.0.1", server.port)

    def serial(conn: RemotingConnection) -> int:
        assert conn.transport is not None
        der = conn.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        from cryptography import x509

        return x509.load_der_x509_certificate(der).serial_number

    first = await connect(addr, tls=_ca_client(pki))
    before = serial(first)
    # the certificate alone changes (a new one, still with the old key on disk): not loaded yet
    new_cert_only = pki.issue("server2", cert_path=tmp_path / "c.tmp", key_path=tmp_path / "k.tmp")
    os.replace(new_cert_only[0], cert)
    await asyncio.sleep(0.4)
    assert tls.reloads == 0
    assert serial(await connect(addr, tls=_ca_client(pki))) == before
    # then the key: both changed, the pair is loaded; new connections see it, the old one still works
    os.replace(new_cert_only[1], key)
    await _until(lambda: tls.reloads == 1)
    after = serial(await connect(addr, tls=_ca_client(pki)))
    assert after != before
    assert (await _echo(first)).code == 0 and serial(first) == before
    # a trust file change reloads at once: a client certificate of a new CA is then accepted
    other = make_pki(tmp_path / "other", "other-ca")
    o_cert, o_key = other.issue("client", client=True)
    with_other_cert = _ca_client(pki, cert_file=str(o_cert), key_file=str(o_key))
    trust.write_bytes(pki.ca_cert.read_bytes() + other.ca_cert.read_bytes())
    await _until(lambda: tls.reloads == 2)
    conn = await connect(addr, tls=with_other_cert)
    assert (await _echo(conn)).code == 0
    # a broken file is logged and the current context kept
    trust.write_text("not a certificate")
    await asyncio.sleep(0.4)
    assert tls.reloads == 2
    assert (await _echo(await connect(addr, tls=_ca_client(pki)))).code == 0
    await server.shutdown()


async def _until(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


# -- keys --------------------------------------------------------------------------------------------------------


def test_keys_read_as_rocketmq_reads_them(tmp_path: Path) -> None:
    keys = TlsKeys.model_validate({"tls.server.mode": "ENFORCING", "tls.server.need.client.auth": "require"})
    assert keys.tls_server_mode == "enforcing"
    assert TlsKeys.model_validate({"tls.server.mode": "strict"}).tls_server_mode == "permissive"
    settings = TlsSettings.of(TlsKeys())
    assert (settings.mode, settings.test_mode, settings.need_client_auth) == ("permissive", True, "none")
    assert not settings.outgoing_tls
    assert TlsSettings.of(TlsKeys.model_validate({"tls.server.mode": "enforcing"})).outgoing_tls
    assert not TlsSettings.of(
        TlsKeys.model_validate({"tls.server.mode": "enforcing", "tls.enable": "false"})
    ).outgoing_tls


def test_the_tls_config_file_overrides_the_properties(tmp_path: Path) -> None:
    file = tmp_path / "tls.properties"
    file.write_text("tls.server.mode=enforcing\ntls.server.certPath=/etc/certs/broker.pem\nbrokerName=ignored\n")
    merged = with_tls_file(
        {"tls.config.file": str(file), "tls.server.mode": "disabled", "tls.server.keyPath": "/k.pem", "listenPort": "1"}
    )
    assert merged["tls.server.mode"] == "enforcing"  # the file wins
    assert merged["tls.server.certPath"] == "/etc/certs/broker.pem"
    assert merged["tls.server.keyPath"] == "/k.pem"  # kept where the file is silent
    assert "brokerName" not in merged
    with pytest.raises(ConfigError, match=r"tls\.config\.file"):
        with_tls_file({"tls.config.file": str(tmp_path / "missing.properties")})
    if not Path("/etc/rocketmq/tls.properties").exists():
        assert with_tls_file({"a": "b"}) == {"a": "b"}
