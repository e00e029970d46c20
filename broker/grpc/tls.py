"""Whether the gRPC port speaks TLS, and its grpcio server credentials, from the broker's own tls.* keys.

RocketMQ's proxy sniffs each connection and serves TLS or plaintext on one port (`tls.server.mode` permissive).
grpcio cannot: a port is TLS or plaintext. The rule here, one port and no new key:

- `tls.server.mode=enforcing`: the gRPC port is TLS only, with the remoting port's certificate and key
  (`tls.server.certPath`, `tls.server.keyPath`, `tls.server.keyPassword`), or a self-signed one when none is
  given and `tls.test.mode.enable` is on; `tls.server.need.client.auth=require` asks every client for a
  certificate signed by `tls.server.trustCertPath`. A plaintext client fails its handshake.
- `permissive` (RocketMQ's default) and `disabled`: the gRPC port is plaintext, as the Python SDK's default
  (`tls_enable=False`) and the Java SDK's `enableSsl(false)` expect; the remoting port still takes both.

The files are read when the endpoint starts; unlike the remoting port, a changed certificate needs a restart.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from broker.config.errors import ConfigError
from broker.transport.tls import TlsSettings, self_signed_pem

__all__ = ["grpc_tls_on", "server_credentials"]


def grpc_tls_on(settings: TlsSettings) -> bool:
    """Whether the gRPC port serves TLS (only then: grpcio cannot offer both on one port)."""
    return settings.mode == "enforcing"


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key} {path!r} cannot be read for the gRPC port: {exc.strerror or exc}") from None


def _plain_key(pem: bytes, password: str, path: str) -> bytes:
    """The private key as unencrypted PKCS#8 PEM (grpcio takes no password), from `pem` encrypted or not."""
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(pem, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"tls.server.keyPath {path!r}: cannot read the key for the gRPC port ({exc}); a PEM key, encrypted "
            "with tls.server.keyPassword if it is"
        ) from None
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def server_credentials(settings: TlsSettings) -> grpc.ServerCredentials:
    """The gRPC port's TLS credentials from the broker's tls.server.* keys; ConfigError naming the key."""
    if settings.server_cert_path:
        cert = _read(settings.server_cert_path, "tls.server.certPath")
        if not settings.server_key_path:
            raise ConfigError("tls.server.keyPath is needed beside tls.server.certPath for the gRPC port")
        key_pem = _read(settings.server_key_path, "tls.server.keyPath")
        key = _plain_key(key_pem, settings.server_key_password, settings.server_key_path)
    elif settings.test_mode:
        cert, key = self_signed_pem()
    else:
        raise ConfigError("the gRPC port's TLS needs tls.server.certPath and tls.server.keyPath")
    trust = settings.server_trust_cert_path
    if settings.need_client_auth == "require" and not trust:
        raise ConfigError("tls.server.need.client.auth=require needs tls.server.trustCertPath for the gRPC port")
    roots = _read(trust, "tls.server.trustCertPath") if trust and settings.need_client_auth != "none" else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=roots, require_client_auth=settings.need_client_auth == "require"
    )
