"""The remoting request signature of RocketMQ's ACL (1.0 and 2.0 alike): HMAC-SHA1 over the sorted extFields.

Both sides import this pure module: the broker and the NameServer (broker/auth) verify a request with
`verify()`, and every client of ours (broker/transport's `RemotingClient` with a signer, so the SDK, mqadmin,
the Spark connector and the broker's own outgoing requests) signs with `sign()`. The content is the values of
every extField except `Signature`, sorted by key (Java's TreeMap: UTF-16 code units), concatenated without
separators, encoded UTF-8, then the body; the signature is Base64(HMAC-SHA1(key=secret, content))
(`AclClientRPCHook`, `AclSigner`). A request of version <= 399 (V4_9_3) does not sign `_UNIQUE_KEY_QUERY`.
Received extFields are already strings here: the decoder writes JSON numbers and booleans as fastjson does
(`15000`, `true`), which is what C++ and ali-ons clients signed.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "Credentials",
    "hmac_pads",
    "sign",
    "sign_command",
    "signed_content",
    "verify",
    "verify_with",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
# RocketMQ's MQVersion ordinal of V4_9_3: requests of that version or older did not sign _UNIQUE_KEY_QUERY
V4_9_3 = 399


def _utf16_key(key: str) -> bytes:
    # Java's String.compareTo orders by UTF-16 code units: differs from Python's code points only beyond the BMP
    return key.encode("utf-16-be")


# (extFields keys in arrival order, skip _UNIQUE_KEY_QUERY) -> a getter of the values to sign, in order: a client
# sends the same header keys in the same order every time, so the sort runs once per kind of request
_ORDERS: dict[tuple[tuple[str, ...], bool], Callable[[dict[str, str]], Any]] = {}
_MAX_ORDERS = 4096
# secret -> SHA-1 states after the HMAC inner and outer pads: a request costs two copies and two updates
_PADS: dict[str, tuple[Any, Any]] = {}
_MAX_PADS = 4096


def _getter(order: list[str]) -> Callable[[dict[str, str]], Any]:
    """ext_fields -> the values of `order` (itemgetter fetches them in one C call); `"".join` of what it gives is
    the signed header text (one key: the value itself, whose join is itself; no key: an empty tuple)."""
    if not order:
        return lambda _fields: ()
    return operator.itemgetter(*order)


def _order(keys: tuple[str, ...], skip_unique: bool) -> Callable[[dict[str, str]], Any]:
    getter = _ORDERS.get((keys, skip_unique))
    if getter is None:
        wanted = [k for k in keys if k != SIGNATURE and not (skip_unique and k == UNIQUE_KEY_QUERY)]
        wanted.sort(key=_utf16_key if not all(k.isascii() for k in wanted) else None)
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        getter = _ORDERS[(keys, skip_unique)] = _getter(wanted)
    return getter


def _header_content(ext_fields: dict[str, str], version: int | None) -> bytes:
    return "".join(_order(tuple(ext_fields), version is not None and version <= V4_9_3)(ext_fields)).encode()


def signed_content(ext_fields: dict[str, str], body: bytes = b"", version: int | None = None) -> bytes:
    """The bytes a signature covers: the values of `ext_fields` but `Signature`, sorted by key, then `body`."""
    content = _header_content(ext_fields, version)
    return content + body if body else content


def hmac_pads(secret_key: str) -> tuple[Any, Any]:
    """The SHA-1 states after `secret_key`'s HMAC inner and outer pads (cached per secret), for `verify_with`."""
    pads = _PADS.get(secret_key)
    if pads is None:
        key = secret_key.encode()
        if len(key) > 64:
            key = hashlib.sha1(key).digest()
        key = key.ljust(64, b"\0")
        pads = (hashlib.sha1(bytes(b ^ 0x36 for b in key)), hashlib.sha1(bytes(b ^ 0x5C for b in key)))
        if len(_PADS) >= _MAX_PADS:
            _PADS.clear()
        _PADS[secret_key] = pads
    return pads


def _digest(secret_key: str, header: bytes, body: bytes) -> bytes:
    """HMAC-SHA1 (RFC 2104) of header + body, from the cached pads (the same bytes hmac.new gives)."""
    inner_pad, outer_pad = hmac_pads(secret_key)
    inner = inner_pad.copy()
    inner.update(header)
    if body:
        inner.update(body)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    return outer.digest()  # type: ignore[no-any-return]


def sign(secret_key: str, ext_fields: dict[str, str], body: bytes = b"", version: int | None = None) -> str:
    """Base64(HMAC-SHA1(secret_key, signed_content(...))), as `AclClientRPCHook` computes it."""
    digest = _digest(secret_key, _header_content(ext_fields, version), body)
    return binascii.b2a_base64(digest, newline=False).decode("ascii")


def verify(secret_key: str, ext_fields: dict[str, str], body: bytes = b"", version: int | None = None) -> bool:
    """Whether the request's `Signature` extField is the one `secret_key` gives, compared in constant time."""
    return verify_with(hmac_pads(secret_key), ext_fields, body, version)


def verify_with(
    pads: tuple[Any, Any], ext_fields: dict[str, str], body: bytes = b"", version: int | None = None
) -> bool:
    """`verify` from a secret's `hmac_pads` (a caller that holds them skips their lookup).

    One function on the per-request path: the steps of `_header_content` and `_digest`, written out. The Base64
    text is compared as bytes, as `sign` gives it: a signature differing only in padding or whitespace is
    refused, as the Java broker's String.equals refuses it."""
    given = ext_fields.get(SIGNATURE)
    if not given:
        return False
    keys = tuple(ext_fields)
    skip_unique = version is not None and version <= V4_9_3
    getter = _ORDERS.get((keys, skip_unique)) or _order(keys, skip_unique)
    inner = pads[0].copy()
    inner.update("".join(getter(ext_fields)).encode())
    if body:
        inner.update(body)
    outer = pads[1].copy()
    outer.update(inner.digest())
    return hmac.compare_digest(binascii.b2a_base64(outer.digest(), newline=False), given.encode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret (RocketMQ's SessionCredentials). The secret is never shown: not in the
    repr, not in str(), not in logs."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key:
            raise ValueError("the access key of credentials is empty")
        if not self.secret_key:
            raise ValueError(f"the secret key of credentials for access key {self.access_key!r} is empty")

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key='***')"

    __str__ = __repr__

    def __call__(self, cmd: RemotingCommand) -> None:
        """Sign `cmd` in place (the RPC hook form a `RemotingClient` takes as its signer)."""
        sign_command(cmd, self)


def sign_command(cmd: RemotingCommand, credentials: Credentials) -> None:
    """Add AccessKey (and SecurityToken) to `cmd`'s extFields and sign them with the body, as the Java hook
    does before every request. The extFields dict is replaced, not changed: callers may share theirs."""
    ext = dict(cmd.ext_fields)
    ext.pop(SIGNATURE, None)
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = sign(credentials.secret_key, ext, cmd.body)
    cmd.ext_fields = ext
