"""Rotation of the operator's own credentials (the Secret `<c>-operator-credentials`), as pure steps.

The pods read one key of that Secret, `auth.properties`: `initAuthenticationUser` (a SUPER user a broker creates
at start when absent) and `innerClientAuthenticationCredentials` (what a broker signs its own requests with:
registration, slave sync, HA). A NameServer knows exactly these two users, in memory, from its start; a broker
knows every user of its store. `accessKey` and `secretKey` are the credentials the Secret is meant to hold.

A rotation is asked for by putting a new `secretKey` into the Secret or by deleting that key. The operator then
moves to a new user (a new name as well as a new secret: a broker still running with the old file signs with the
old password, which an updated user would refuse) through states of auth.properties (init, inner), one roll of
the pods each:

    (old, old)  --create the new user on every master-->  (new, old)  --rolled-->  (old, new)  --rolled-->
    (new, new) + retiredAccessKey  --rolled, old user deleted on every master-->  (new, new)

During each roll some pods read the previous file and some the next. Every NameServer knows both users of its
file, and every broker signs with its file's inner user: each pair of neighbouring states shares the inner user
of one with the users of the other, so every registration and every slave sync is accepted throughout, and the
operator signs with the inner user of the current file (known to every NameServer of either state, and to
every broker: the new user is in the stores before the first roll, the old one leaves them after the last).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from broker.config.properties import parse_properties
from broker.protocol.signature import Credentials
from rocketcluster.render_security import ACCESS_KEY, AUTH_FILE, OPERATOR_USER, SECRET_KEY, auth_properties

__all__ = [
    "RETIRED_KEY",
    "AuthFile",
    "CredentialsError",
    "RotationStep",
    "hashed_view",
    "next_access_key",
    "parse_auth_file",
    "pods_rolled",
    "rotation_step",
]

#: The Secret key naming the old user while the last roll runs; its deletion from the brokers ends a rotation.
RETIRED_KEY: Final = "retiredAccessKey"
_GENERATION = re.compile(rf"^{re.escape(OPERATOR_USER)}(?:-g(\d+))?$")

Phase = Literal["steady", "start", "rolling", "advance", "finish", "cleanup"]


class CredentialsError(Exception):
    """The operator's Secret cannot be used (a missing or malformed auth.properties): the message names the key,
    never a secret."""


@dataclass(frozen=True, slots=True)
class AuthFile:
    """auth.properties as the pods read it."""

    init: Credentials
    inner: Credentials


@dataclass(frozen=True, slots=True)
class RotationStep:
    """What one pass does about the operator's credentials.

    `sign`: what the operator signs every admin request with. `create_user`: a SUPER user to create on every
    master before `secret` is written. `delete_user`: a user name to delete on every master before `secret` is
    written. `secret`: the Secret's new data (None: leave it). `wait_for_roll`: the next step needs every pod to
    run with the current Secret first."""

    phase: Phase
    sign: Credentials
    create_user: Credentials | None = None
    delete_user: str | None = None
    secret: dict[str, str] | None = None
    wait_for_roll: bool = False


def _json_object(text: str | None, fields: tuple[str, str], key: str) -> Credentials:
    try:
        data = json.loads(text or "")
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(data.get(f), str) and data.get(f) for f in fields):
        raise CredentialsError(f"{AUTH_FILE}: {key} is missing or is not a JSON object with {' and '.join(fields)}")
    return Credentials(data[fields[0]], data[fields[1]])


def parse_auth_file(data: Mapping[str, str] | None, secret_name: str) -> AuthFile:
    """The two users of the Secret's auth.properties; CredentialsError when it is missing or malformed."""
    text = (data or {}).get(AUTH_FILE)
    if not text:
        raise CredentialsError(f"Secret {secret_name} has no {AUTH_FILE}: restore it (the brokers know its users)")
    try:
        props = parse_properties(text)
    except ValueError as exc:
        raise CredentialsError(f"Secret {secret_name}: {AUTH_FILE} is not a properties file") from exc
    try:
        init = _json_object(props.get("initAuthenticationUser"), ("username", "password"), "initAuthenticationUser")
        inner = _json_object(
            props.get("innerClientAuthenticationCredentials"),
            ("accessKey", "secretKey"),
            "innerClientAuthenticationCredentials",
        )
    except CredentialsError as exc:
        raise CredentialsError(f"Secret {secret_name}: {exc}") from None
    return AuthFile(init, inner)


def next_access_key(current: str) -> str:
    """The new user's name: `rocketcluster-operator-g<n+1>` after `...-g<n>` (the first is generation 1)."""
    found = _GENERATION.match(current)
    generation = int(found.group(1) or 1) if found else 1
    return f"{OPERATOR_USER}-g{generation + 1}"


def _same(a: Credentials, b: Credentials) -> bool:
    return a.access_key == b.access_key and a.secret_key == b.secret_key


def _file(init: Credentials, inner: Credentials) -> str:
    return auth_properties(init.access_key, init.secret_key, inner=(inner.access_key, inner.secret_key))


def _data(want: Credentials, init: Credentials, inner: Credentials, retired: str | None = None) -> dict[str, str]:
    data = {ACCESS_KEY: want.access_key, SECRET_KEY: want.secret_key, AUTH_FILE: _file(init, inner)}
    if retired is not None:
        data[RETIRED_KEY] = retired
    return data


def rotation_step(data: Mapping[str, str] | None, secret_name: str, *, rolled: bool, fresh_secret: str) -> RotationStep:
    """The step of this pass, from the Secret's data and whether every pod runs with it (`pods_rolled`).
    `fresh_secret`: a random secret, used when a rotation starts with the secretKey deleted."""
    current = parse_auth_file(data, secret_name)
    init, inner = current.init, current.inner
    given = data or {}
    want_key, want_secret = given.get(ACCESS_KEY, ""), given.get(SECRET_KEY, "")
    sign = inner
    if _same(init, inner):
        retired = given.get(RETIRED_KEY)
        if retired is not None:  # the last roll of a rotation (a new request waits for its end)
            if not rolled:
                return RotationStep("rolling", sign, wait_for_roll=True)
            rest = {k: v for k, v in given.items() if k != RETIRED_KEY}
            return RotationStep("cleanup", sign, delete_user=retired, secret=rest)
        if want_key == init.access_key and want_secret == init.secret_key:
            return RotationStep("steady", sign)
        # a new secretKey was put in, or it was deleted: a new user (accessKey is the operator's to choose)
        new = Credentials(next_access_key(init.access_key), want_secret or fresh_secret)
        return RotationStep("start", sign, create_user=new, secret=_data(new, new, inner))
    if (init.access_key, init.secret_key) == (want_key, want_secret):  # (new, old)
        if not rolled:
            return RotationStep("rolling", sign, wait_for_roll=True)
        return RotationStep("advance", sign, secret=_data(init, inner, init))
    if (inner.access_key, inner.secret_key) == (want_key, want_secret):  # (old, new)
        if not rolled:
            return RotationStep("rolling", sign, wait_for_roll=True)
        return RotationStep("finish", sign, secret=_data(inner, inner, inner, retired=init.access_key))
    raise CredentialsError(
        f"Secret {secret_name} was edited during a rotation: its {ACCESS_KEY}/{SECRET_KEY} match neither user of "
        f"{AUTH_FILE}. Put back the {ACCESS_KEY} and {SECRET_KEY} of one of them"
    )


def hashed_view(data: Mapping[str, str] | None) -> dict[str, str] | None:
    """The part of the operator's Secret the pods read, for the secrets hash: auth.properties, with the other two
    keys given as its init user (so a requested rotation rolls nothing by itself, and a steady Secret hashes as
    its whole data does)."""
    if data is None:
        return None
    text = data.get(AUTH_FILE)
    if text is None:
        return dict(data)
    try:
        init = parse_auth_file(data, "").init
    except CredentialsError:
        return dict(data)
    return {ACCESS_KEY: init.access_key, SECRET_KEY: init.secret_key, AUTH_FILE: text}


def pods_rolled(pod_hashes: list[tuple[str | None, bool]], expected: int, secrets_hash: str) -> bool:
    """Whether every expected pod runs with the Secrets of `secrets_hash`: (its secrets-hash annotation, ready)."""
    if len(pod_hashes) < expected:
        return False
    return all(found == secrets_hash and ready for found, ready in pod_hashes)
