"""The checker's send fast path (`AuthChecker.guard`) against the full check (`AuthChecker.check`).

Two checkers over one store see the same sequence of wire-decoded requests (real frames: signed, encoded,
decoded): one answers through `guard` (which remembers accepted sends per connection, user and topic and then
verifies only the signature), the other through `check` only. Every request must get the same answer:
accepted, or refused with the same message. The sequences cover valid, forged, replayed and altered requests
and every change of the users or ACLs the fast path must notice, stateless and stateful.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.auth.checker import AuthChecker, AuthSettings, ConnectionAuth
from broker.auth.model import (
    Acl,
    Action,
    AuthError,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
)
from broker.auth.store import AuthStore
from broker.protocol.command import RemotingCommand, decode_frame, encode_binary
from broker.protocol.signature import SIGNATURE, Credentials, sign_command

ALICE = Credentials("alice", "alicesecret")
FORGED = Credentials("alice", "not-alices-secret")
BOB = Credentials("bob", "bobsecret1")
GHOST = Credentials("ghost", "ghostsecret")
IP = "10.0.0.7"


class _Conn:
    """A connection as the checker sees it: a peer, and room for what the checker remembers of it."""

    def __init__(self, peer: str = f"{IP}:50000") -> None:
        self.peer = peer
        self.auth: ConnectionAuth | None = None


class _RoomlessConn:
    """A connection object that cannot hold the checker's memory (no `auth` attribute, no __dict__)."""

    __slots__ = ("peer",)

    def __init__(self, peer: str = f"{IP}:50000") -> None:
        self.peer = peer


def _send(creds: Credentials | None, topic: str = "Orders", body: bytes = b"x" * 1024, code: int = 310) -> bytes:
    """A SEND_MESSAGE_V2 (or `code`) frame as a signing client puts it on the wire."""
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
           "i": "UNIQ_KEY\x01AC1100010000\x02", "j": "0", "k": "false"}  # fmt: skip
    cmd = RemotingCommand(code=code, opaque=1, ext_fields=ext, body=body)
    if creds is not None:
        sign_command(cmd, creds)
    return encode_binary(cmd)[4:]


def _altered(frame: bytes, change: Callable[[RemotingCommand], None]) -> bytes:
    """`frame` changed after signing (the signature kept), as a man in the middle would."""
    cmd = decode_frame(frame)
    change(cmd)
    return encode_binary(cmd)[4:]


def _guarded(checker: AuthChecker, frame: bytes, conn: _Conn | _RoomlessConn) -> str | None:
    """The guard's answer as `_answer` gives it: None, or the refusal's remark."""
    refusal = checker.guard(conn, decode_frame(frame))
    return None if refusal is None else refusal.remark


def _answer(check: Callable[..., None], frame: bytes, conn: _Conn) -> str | None:
    try:
        check(decode_frame(frame), IP, conn)
    except AuthError as exc:
        return str(exc)
    return None


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    store = AuthStore(tmp_path)
    store.create_user(User(ALICE.access_key, ALICE.secret_key))
    store.create_user(User(BOB.access_key, BOB.secret_key))
    allow = PolicyEntry(Resource.parse("Topic:Orders"), (Action.PUB,))
    store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [allow])]))
    store.put_acl(Acl("bob", [Policy(PolicyType.CUSTOM, [allow])]))
    return store


def _set_body(cmd: RemotingCommand) -> None:
    cmd.body = b"y" + cmd.body[1:]


def _set_topic(cmd: RemotingCommand) -> None:
    cmd.ext_fields = {**cmd.ext_fields, "b": "Payments"}


def _set_queue(cmd: RemotingCommand) -> None:
    cmd.ext_fields = {**cmd.ext_fields, "e": "2"}


def _bad_padding(cmd: RemotingCommand) -> None:
    cmd.ext_fields = {**cmd.ext_fields, SIGNATURE: cmd.ext_fields[SIGNATURE].rstrip("=")}


def _no_signature(cmd: RemotingCommand) -> None:
    cmd.ext_fields = {k: v for k, v in cmd.ext_fields.items() if k != SIGNATURE}


def _as_bob(cmd: RemotingCommand) -> None:
    cmd.ext_fields = {**cmd.ext_fields, "AccessKey": "bob"}


def _requests() -> list[tuple[str, bytes]]:
    good = _send(ALICE)
    return [
        ("valid", good),
        ("replayed", good),
        ("forged", _send(FORGED)),
        ("body altered", _altered(good, _set_body)),
        ("topic altered", _altered(good, _set_topic)),
        ("queue altered", _altered(good, _set_queue)),
        ("signature without padding", _altered(good, _bad_padding)),
        ("no signature", _altered(good, _no_signature)),
        ("AccessKey swapped", _altered(good, _as_bob)),
        ("unknown user", _send(GHOST)),
        ("unsigned", _send(None)),
        ("topic not allowed", _send(ALICE, "Payments")),
        ("retry topic", _send(ALICE, "%RETRY%PG")),
        ("batch", _send(ALICE, code=320)),
        ("other user", _send(BOB)),
        ("valid again", _send(ALICE, body=b"z" * 1024)),
    ]


def _changes(store: AuthStore) -> list[tuple[str, Callable[[], object]]]:
    deny = PolicyEntry(Resource.parse("Topic:Orders"), (Action.PUB,), (), Decision.DENY)
    return [
        ("nothing", lambda: None),
        ("alice's password", lambda: store.update_user("alice", "alicesecret2", None, None)),
        ("alice's password back", lambda: store.update_user("alice", ALICE.secret_key, None, None)),
        ("alice disabled", lambda: store.update_user("alice", "", None, UserStatus.DISABLE)),
        ("alice enabled", lambda: store.update_user("alice", "", None, UserStatus.ENABLE)),
        ("alice's ACL denies", lambda: store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [deny])]))),
        ("alice's ACL deleted", lambda: store.delete_acl("User:alice", None, None)),
        (
            "alice's ACL allows Payments only",
            lambda: store.put_acl(
                Acl(
                    "alice", [Policy(PolicyType.CUSTOM, [PolicyEntry(Resource.parse("Topic:Payments"), (Action.PUB,))])]
                )
            ),
        ),
        ("alice deleted", lambda: store.delete_user("alice")),
        ("alice back", lambda: store.create_user(User(ALICE.access_key, ALICE.secret_key))),
        (
            "a master's tables installed",
            lambda: store.replace_tables(
                [User(ALICE.access_key, ALICE.secret_key).to_json()],
                [
                    Acl(
                        "alice", [Policy(PolicyType.CUSTOM, [PolicyEntry(Resource.parse("Topic:*"), (Action.PUB,))])]
                    ).to_json()
                ],
            ),
        ),
    ]


@pytest.mark.parametrize("stateful", [None, 60.0], ids=["stateless", "stateful"])
def test_the_send_fast_path_answers_as_the_plain_check(store: AuthStore, stateful: float | None) -> None:
    settings = AuthSettings(authentication=True, authorization=True, cluster="C1", stateful_seconds=stateful)
    fast, plain = AuthChecker(settings, store), AuthChecker(settings, store)
    fast_conn, plain_conn = _Conn(), _Conn()
    answers: list[tuple[str, str, str | None]] = []
    for change_name, change in _changes(store):
        change()
        for name, frame in _requests():
            got = _guarded(fast, frame, fast_conn)
            want = _answer(plain.check, frame, plain_conn)
            assert got == want, f"after {change_name}, {name}: fast {got!r}, plain {want!r}"
            answers.append((change_name, name, got))
    # the sequences exercised both answers, and the fast path held remembered sends
    assert any(a is None for _c, _n, a in answers) and any(a is not None for _c, _n, a in answers)
    assert fast_conn.auth is not None and fast_conn.auth.sends
    by_name = {(c, n): a for c, n, a in answers}
    assert by_name[("nothing", "valid")] is None and by_name[("nothing", "replayed")] is None
    assert "check signature failed" in (by_name[("alice's password", "valid")] or "")
    assert "disabled" in (by_name[("alice disabled", "valid")] or "")
    assert "no permission" in (by_name[("alice's ACL denies", "valid")] or "")
    assert "not found" in (by_name[("alice deleted", "valid")] or "")


def test_the_fast_path_refuses_a_forged_send_after_accepting_good_ones(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, authorization=True, cluster="C1"), store)
    conn = _Conn()
    for _ in range(3):
        assert _guarded(checker, _send(ALICE), conn) is None
    assert conn.auth is not None and conn.auth.sends  # the later sends took the fast path
    for frame in (_send(FORGED), _altered(_send(ALICE), _set_body), _altered(_send(ALICE), _bad_padding)):
        assert _guarded(checker, frame, conn) == "check signature failed. (User:alice, request code 310)"


def test_the_fast_path_keeps_addresses_apart(store: AuthStore) -> None:
    only_there = PolicyEntry(Resource.parse("Topic:Orders"), (Action.PUB,), ("10.0.0.7",))
    store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [only_there])]))
    checker = AuthChecker(AuthSettings(authentication=True, authorization=True, cluster="C1"), store)
    frame = _send(ALICE)
    assert _guarded(checker, frame, _Conn()) is None
    assert "no permission" in (_guarded(checker, frame, _Conn("10.0.0.8:1")) or "")


@pytest.mark.parametrize("stateful", [None, 60.0], ids=["stateless", "stateful"])
def test_a_connection_without_room_for_the_memory_gets_the_full_check_each_time(
    store: AuthStore, stateful: float | None
) -> None:
    # nor the stateful trust: each request is checked as the stateless strategy checks it
    settings = AuthSettings(authentication=True, authorization=True, cluster="C1", stateful_seconds=stateful)
    checker = AuthChecker(settings, store)
    plain = AuthChecker(dataclasses.replace(settings, stateful_seconds=None), store)
    conn, plain_conn = _RoomlessConn(), _Conn()
    for name, frame in _requests():
        assert _guarded(checker, frame, conn) == _answer(plain.check, frame, plain_conn), name
    assert not hasattr(conn, "auth")
