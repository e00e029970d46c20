"""TLS settings and contexts for the remoting and HA ports, as RocketMQ's `TlsSystemConfig` spells them.

`TlsKeys` declares RocketMQ's `tls.*` keys; the broker's `BrokerConfig` and the NameServer's `NamesrvConfig`
extend it, and their loaders call `with_tls_file` first, which lays the file named by `tls.config.file`
(default /etc/rocketmq/tls.properties when it exists) over the keys of broker.conf / namesrv properties, as
RocketMQ lays that file over its JVM system properties. `TlsSettings.of(config)` is what the servers read:

- `ServerTls` holds a server's SSLContext (built at start from tls.server.*, or from a self-signed certificate
  made on first use with tls.test.mode.enable when no certificate is given) and reloads it when the files
  change: a trust file change at once, certificate and key only after both changed (RocketMQ's rule); only new
  connections use the new context. `broker.transport.listener.Listener` peeks each connection's first byte and
  applies the mode (disabled | permissive | enforcing).
- `outgoing_context` is the broker's own client side (NameServer registration, slave sync, HA), from
  tls.client.* and tls.enable; `client_context` is the SDK's and the CLI's (verifies the server by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from broker.config.errors import ConfigError
from broker.config.properties import parse_properties

__all__ = [
    "DEFAULT_TLS_CONFIG_FILE",
    "TLS_RECORD_HANDSHAKE",
    "ServerTls",
    "TlsKeys",
    "TlsMode",
    "TlsSettings",
    "client_context",
    "outgoing_context",
    "self_signed_pem",
    "with_tls_file",
]

log = logging.getLogger(__name__)

DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"
# The first byte of a TLS connection: a handshake record (RFC 8446 5.1, ContentType handshake = 22).
TLS_RECORD_HANDSHAKE = 0x16
_MODES = ("disabled", "permissive", "enforcing")


def _mode(value: Any) -> Any:
    """RocketMQ's TlsMode.parse: case-insensitive, anything unknown is permissive."""
    if not isinstance(value, str):
        return value
    word = value.strip().lower()
    if word in _MODES:
        return word
    log.warning("tls.server.mode %r is not disabled, permissive or enforcing: permissive, as RocketMQ reads it", value)
    return "permissive"


TlsMode = Annotated[Literal["disabled", "permissive", "enforcing"], BeforeValidator(_mode)]
ClientAuth = Literal["none", "optional", "require"]


class TlsKeys(BaseModel):
    """RocketMQ's tls.* keys (remoting/.../netty/TlsSystemConfig.java) and three of ours for the server's bounds.

    A mixin of BrokerConfig and NamesrvConfig: their model_config (populate_by_name, extra="forbid") applies.
    """

    tls_config_file: str = Field(default="", alias="tls.config.file")
    tls_server_mode: TlsMode = Field(default="permissive", alias="tls.server.mode")
    # RocketMQ's default: a server without a certificate makes a self-signed one (first TLS connection).
    tls_test_mode_enable: bool = Field(default=True, alias="tls.test.mode.enable")
    tls_server_need_client_auth: ClientAuth = Field(default="none", alias="tls.server.need.client.auth")
    tls_server_key_path: str = Field(default="", alias="tls.server.keyPath")
    tls_server_key_password: str = Field(default="", alias="tls.server.keyPassword")
    tls_server_cert_path: str = Field(default="", alias="tls.server.certPath")
    tls_server_auth_client: bool = Field(default=False, alias="tls.server.authClient")
    tls_server_trust_cert_path: str = Field(default="", alias="tls.server.trustCertPath")
    # The server's own outgoing connections (NameServer registration, slave sync, HA): unset = on when enforcing.
    tls_enable: bool | None = Field(default=None, alias="tls.enable")
    tls_client_key_path: str = Field(default="", alias="tls.client.keyPath")
    tls_client_key_password: str = Field(default="", alias="tls.client.keyPassword")
    tls_client_cert_path: str = Field(default="", alias="tls.client.certPath")
    tls_client_auth_server: bool = Field(default=False, alias="tls.client.authServer")
    tls_client_trust_cert_path: str = Field(default="", alias="tls.client.trustCertPath")
    # Ours: a handshake not done within this is dropped; at most this many at once; how often files are checked.
    tls_server_handshake_timeout_millis: int = Field(default=10_000, alias="tls.server.handshakeTimeoutMillis", gt=0)
    tls_server_max_handshakes: int = Field(default=256, alias="tls.server.maxHandshakes", gt=0)
    tls_reload_interval_millis: int = Field(default=5_000, alias="tls.reloadIntervalMillis", ge=0)


def with_tls_file(properties: Mapping[str, Any], *, origin: str = "config") -> dict[str, Any]:
    """`properties` with the tls.* keys of the file named by `tls.config.file` laid over them (the file wins).

    With no `tls.config.file`, /etc/rocketmq/tls.properties is read when it exists (RocketMQ's default). A named
    file that cannot be read is a ConfigError; a key in it that is not tls.* is warned about and ignored.
    """
    merged = dict(properties)
    named = str(merged.get("tls.config.file", "") or "").strip()
    path = Path(named or DEFAULT_TLS_CONFIG_FILE)
    if not named and not path.is_file():
        return merged
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"tls.config.file {str(path)!r} (from {origin}) cannot be read: {exc.strerror or exc}"
        ) from None
    for key, value in parse_properties(text).items():
        if key.startswith("tls.") and key != "tls.config.file":
            merged[key] = value
        else:
            log.warning("key %r in %s is not a tls.* key and is ignored", key, path)
    return merged


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The tls.* values a server and its outgoing connections read, from any model extending TlsKeys."""

    mode: str = "permissive"
    test_mode: bool = True
    need_client_auth: str = "none"
    server_key_path: str = ""
    server_key_password: str = ""
    server_cert_path: str = ""
    server_auth_client: bool = False
    server_trust_cert_path: str = ""
    enable: bool | None = None
    client_key_path: str = ""
    client_key_password: str = ""
    client_cert_path: str = ""
    client_auth_server: bool = False
    client_trust_cert_path: str = ""
    handshake_timeout: float = 10.0
    max_handshakes: int = 256
    reload_interval: float = 5.0

    @classmethod
    def of(cls, keys: TlsKeys) -> TlsSettings:
        return cls(
            mode=keys.tls_server_mode,
            test_mode=keys.tls_test_mode_enable,
            need_client_auth=keys.tls_server_need_client_auth,
            server_key_path=keys.tls_server_key_path,
            server_key_password=keys.tls_server_key_password,
            server_cert_path=keys.tls_server_cert_path,
            server_auth_client=keys.tls_server_auth_client,
            server_trust_cert_path=keys.tls_server_trust_cert_path,
            enable=keys.tls_enable,
            client_key_path=keys.tls_client_key_path,
            client_key_password=keys.tls_client_key_password,
            client_cert_path=keys.tls_client_cert_path,
            client_auth_server=keys.tls_client_auth_server,
            client_trust_cert_path=keys.tls_client_trust_cert_path,
            handshake_timeout=keys.tls_server_handshake_timeout_millis / 1000,
            max_handshakes=keys.tls_server_max_handshakes,
            reload_interval=keys.tls_reload_interval_millis / 1000,
        )

    @property
    def outgoing_tls(self) -> bool:
        """RocketMQ: the server's own NettyClientConfig.useTLS is tls.enable, or (unset) whether it enforces."""
        return self.enable if self.enable is not None else self.mode == "enforcing"

    @property
    def watched_files(self) -> dict[str, str]:
        """role (cert, key, trust) -> path, for the files given."""
        files = {"cert": self.server_cert_path, "key": self.server_key_path, "trust": self.server_trust_cert_path}
        return {role: path for role, path in files.items() if path}


# ---------------------------------------------------------------------------------------------------- contexts


def _server_context(s: TlsSettings, self_signed: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
    """The server's SSLContext from its settings; ConfigError naming the key when something is wrong."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if s.server_cert_path:
        _load_chain(ctx, s.server_cert_path, s.server_key_path, s.server_key_password, "tls.server")
    elif self_signed is not None:
        with tempfile.TemporaryDirectory(prefix="rocketcluster-tls-") as tmp:
            cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
            cert.write_bytes(self_signed[0])
            key.write_bytes(self_signed[1])
            ctx.load_cert_chain(cert, key)
    else:
        raise ConfigError("TLS needs tls.server.certPath and tls.server.keyPath (or tls.test.mode.enable=true)")
    trust = s.server_trust_cert_path
    if s.need_client_auth == "none":
        ctx.verify_mode = ssl.CERT_NONE
    elif trust:
        # Python's ssl cannot take a client certificate without verifying it: with a trust file it is verified
        # (authClient or not); RocketMQ without authClient would take any certificate.
        _load_trust(ctx, trust, "tls.server.trustCertPath")
        ctx.verify_mode = ssl.CERT_REQUIRED if s.need_client_auth == "require" else ssl.CERT_OPTIONAL
    elif s.need_client_auth == "require" or s.server_auth_client:
        raise ConfigError(
            f"tls.server.need.client.auth={s.need_client_auth} with tls.server.authClient="
            f"{str(s.server_auth_client).lower()} needs tls.server.trustCertPath: this server verifies every "
            "client certificate it asks for"
        )
    else:
        log.warning(
            "tls.server.need.client.auth=optional without tls.server.trustCertPath: client certificates are not "
            "asked for (Python's ssl cannot accept one it does not verify)"
        )
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str, prefix: str) -> None:
    try:
        ctx.load_cert_chain(cert, key or None, password=password or None)
    except FileNotFoundError as exc:
        raise ConfigError(f"{prefix}.certPath/keyPath: {exc.filename or cert} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"{prefix}.certPath {cert!r} / keyPath {key!r}: cannot load the certificate and key ({exc}); "
            f"PEM files, the key PKCS#8 or PKCS#1, encrypted with {prefix}.keyPassword if it is"
        ) from None


def _load_trust(ctx: ssl.SSLContext, path: str, key: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{key} {path!r}: cannot load the trusted certificates ({exc})") from None


def client_context(
    *,
    verify: bool = True,
    check_hostname: bool = True,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """A client SSLContext: verifies the server against `ca_file` (else the system's CAs) and its host name
    unless told not to; `cert_file`/`key_file` for servers that ask for a client certificate (mTLS)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if verify:
        ctx.check_hostname = check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        if ca_file:
            _load_trust(ctx, ca_file, "CA file")
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        _load_chain(ctx, cert_file, key_file or "", key_password or "", "client")
    return ctx


def outgoing_context(s: TlsSettings) -> ssl.SSLContext | None:
    """The broker's (or NameServer's) own client context, None for plaintext: tls.client.* as RocketMQ reads them,
    except that authServer=true verifies the host name as well (the certificate must name the address dialled)."""
    if not s.outgoing_tls:
        return None
    return client_context(
        verify=s.client_auth_server,
        ca_file=s.client_trust_cert_path or None,
        cert_file=s.client_cert_path or None,
        key_file=s.client_key_path or None,
        key_password=s.client_key_password or None,
    )


def self_signed_pem(hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed certificate (EC P-256) and its key as PEM, naming `hosts` (DNS names or IP addresses)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "rocketcluster")])
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


# ---------------------------------------------------------------------------------------------------- server side


class ServerTls:
    """A server's TLS mode and current SSLContext, reloaded when its files change (one per process: the broker's
    remoting and HA listeners share it)."""

    def __init__(self, settings: TlsSettings, *, name: str = "server") -> None:
        self.settings = settings
        self.mode = settings.mode
        self.name = name
        self.reloads = 0  # contexts built after the first (tests and logs)
        self._context: ssl.SSLContext | None = None
        self._unavailable: str | None = None
        self._stamps: dict[str, tuple[int, int, int] | None] = {}
        self._changed: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        if self.mode != "disabled" and settings.server_cert_path:
            self._context = _server_context(settings)  # a bad file stops the server at start, naming the key
            self._stamps = self._read_stamps()

    @property
    def handshake_timeout(self) -> float:
        return self.settings.handshake_timeout

    @property
    def max_handshakes(self) -> int:
        return self.settings.max_handshakes

    def context(self) -> ssl.SSLContext | None:
        """The context for a new TLS connection; None (the reason logged once) when this server has none."""
        if self._context is not None or self._unavailable is not None:
            return self._context
        s = self.settings
        try:
            if not s.test_mode:
                raise ConfigError("no tls.server.certPath/keyPath and tls.test.mode.enable=false")
            self._context = _server_context(s, self_signed_pem())
            log.warning(
                "%s: TLS with a self-signed certificate (tls.test.mode.enable): clients cannot verify this "
                "server; set tls.server.certPath and tls.server.keyPath for real use",
                self.name,
            )
        except ConfigError as exc:
            self._unavailable = str(exc)
            log.error("%s: TLS connections are refused: %s", self.name, exc)
        return self._context

    # -- reload -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the certificate, key and trust files (mtime polling every tls.reloadIntervalMillis)."""
        if (
            self._task is None
            and self.mode != "disabled"
            and self.settings.watched_files
            and self.settings.reload_interval
        ):
            self._task = asyncio.get_running_loop().create_task(self._watch(), name=f"tls-reload-{self.name}")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _read_stamps(self) -> dict[str, tuple[int, int, int] | None]:
        stamps: dict[str, tuple[int, int, int] | None] = {}
        for role, path in self.settings.watched_files.items():
            try:
                st = os.stat(path)
                stamps[role] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                stamps[role] = None
        return stamps

    def check_files(self) -> bool:
        """One poll: note which files changed since the last load; reload when RocketMQ would. True: reloaded."""
        stamps = self._read_stamps()
        self._changed |= {role for role, stamp in stamps.items() if stamp != self._stamps.get(role)}
        self._stamps = stamps
        if not self._changed:
            return False
        if "trust" in self._changed:
            why = "trust file changed"
        elif {"cert", "key"} <= self._changed or (not self.settings.server_key_path and "cert" in self._changed):
            why = "certificate and key changed"
        else:
            return False  # only one of certificate and key: wait for the other
        self._changed.clear()
        try:
            context = _server_context(self.settings)
        except ConfigError as exc:
            log.error(
                "%s: TLS reload (%s) failed, new connections keep the previous certificate: %s", self.name, why, exc
            )
            return False
        self._context = context
        self._unavailable = None
        self.reloads += 1
        log.info("%s: TLS context reloaded (%s); new connections use it", self.name, why)
        return True

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reload_interval)
            try:
                self.check_files()
            except Exception:
                log.exception("%s: TLS file check failed", self.name)
