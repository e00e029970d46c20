"""The auth keys of broker.conf and namesrv.properties, read into typed values without ever echoing a secret.

`BrokerConfig` and `NamesrvConfig` keep the keys as text and call `check_auth_keys()` from a model validator
(whose errors name the key, never the value); the broker and the NameServer call the parse functions when
they build their `AuthChecker`. RocketMQ's forms: `initAuthenticationUser={"username":"u","password":"p"}`,
`innerClientAuthenticationCredentials={"accessKey":"ak","secretKey":"sk"}`, whitelists as comma-separated
request codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from broker.auth.model import User, UserType
from broker.protocol.signature import Credentials

__all__ = [
    "SECRET_KEYS",
    "STATEFUL_AUTHENTICATION",
    "STATELESS_AUTHENTICATION",
    "check_auth_keys",
    "parse_codes",
    "parse_credentials",
    "parse_init_user",
    "parse_stateful",
]

INIT_USER_KEY = "initAuthenticationUser"
INNER_CREDENTIALS_KEY = "innerClientAuthenticationCredentials"
#: Keys whose values are secrets: shown masked (mqbroker -p, GET_BROKER_CONFIG), never in errors or logs.
SECRET_KEYS = frozenset({INIT_USER_KEY, INNER_CREDENTIALS_KEY})
MASK = "******"


def _object(text: str, key: str, fields: tuple[str, str]) -> dict[str, Any] | None:
    if not text or not text.strip():
        return None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(data.get(f), str) and data.get(f) for f in fields):
        raise ValueError(
            f'{key} is not a JSON object {{"{fields[0]}":"...","{fields[1]}":"..."}} of two non-empty strings'
        )
    return data


def parse_init_user(text: str, key: str = INIT_USER_KEY) -> User | None:
    """initAuthenticationUser -> the SUPER user to create at start when absent."""
    data = _object(text, key, ("username", "password"))
    return None if data is None else User(data["username"], data["password"], UserType.SUPER)


def parse_credentials(text: str, key: str = INNER_CREDENTIALS_KEY) -> Credentials | None:
    """innerClientAuthenticationCredentials -> what the server signs its own requests with."""
    data = _object(text, key, ("accessKey", "secretKey"))
    return None if data is None else Credentials(data["accessKey"], data["secretKey"])


def parse_codes(text: str, key: str) -> frozenset[int]:
    """`"10,310"` -> {10, 310} (RocketMQ splits authenticationWhitelist on commas)."""
    codes: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            codes.add(int(part))
        except ValueError:
            raise ValueError(
                f"{key}: {part[:32]!r} is not a request code (a comma-separated list of numbers)"
            ) from None
    return frozenset(codes)


# RocketMQ's authenticationStrategy values (AuthConfig); the short names are accepted too
STATELESS_AUTHENTICATION = "org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy"
STATEFUL_AUTHENTICATION = "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"


def parse_stateful(text: str, key: str = "authenticationStrategy") -> bool:
    """Whether `authenticationStrategy` names RocketMQ's stateful strategy (the stateless one is the default)."""
    name = (text or "").strip()
    if name in ("", STATELESS_AUTHENTICATION, "StatelessAuthenticationStrategy"):
        return False
    if name in (STATEFUL_AUTHENTICATION, "StatefulAuthenticationStrategy"):
        return True
    raise ValueError(f"{key} is neither RocketMQ's StatelessAuthenticationStrategy nor StatefulAuthenticationStrategy")


def check_auth_keys(values: Mapping[str, str]) -> None:
    """Validate the auth keys present in `values` (alias -> text); raises ValueError naming the key only."""
    parse_init_user(values.get(INIT_USER_KEY, ""))
    parse_credentials(values.get(INNER_CREDENTIALS_KEY, ""))
    parse_stateful(values.get("authenticationStrategy", ""))
    for key in ("authenticationWhitelist", "authorizationWhitelist"):
        parse_codes(values.get(key, ""), key)
