"""The signature's and the checker's fast paths held equal to plain reference versions on generated requests.

The reference signature is RocketMQ's rule written the plainest way (docs/../security.md, `AclClientRPCHook`):
the values of every extField but `Signature` (and `_UNIQUE_KEY_QUERY` for a request of version <= V4_9_3),
sorted by key in UTF-16 order, concatenated, UTF-8, then the body; Base64(HMAC-SHA1(secret, content)) from
`hmac.new`, compared in constant time. `sign`, `verify` and `verify_with` (cached pads, cached key orders, one
itemgetter) must agree with it on every generated request: valid, forged, altered body, altered, missing or
added field, missing or malformed signature.

The reference checker is `AuthChecker.check` (the full check from the tables, no send memory) with the
reference signature and a stateful trust of its own; the checker under test answers through `guard` (the send
fast path: sends remembered on the connection, held pads, the connection's trust). Both see the same generated
sequence of wire-decoded requests and changes of the users and ACLs, and must give the same answer: accepted,
or refused with the same message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from broker.protocol.signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    Credentials,
    hmac_pads,
    sign,
    sign_command,
    verify,
    verify_with,
)

# --- the reference signature -------------------------------------------------------------------------------


def reference_content(ext: dict[str, str], body: bytes, version: int | None) -> bytes:
    skip_unique = version is not None and version <= 399
    keys = [k for k in ext if k != SIGNATURE and not (skip_unique and k == UNIQUE_KEY_QUERY)]
    keys.sort(key=lambda k: k.encode("utf-16-be"))
    return "".join(ext[k] for k in keys).encode("utf-8") + body


def reference_sign(secret: str, ext: dict[str, str], body: bytes, version: int | None) -> str:
    mac = hmac.new(secret.encode("utf-8"), reference_content(ext, body, version), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def reference_verify(secret: str, ext: dict[str, str], body: bytes, version: int | None) -> bool:
    given_signature = ext.get(SIGNATURE)
    if not given_signature:
        return False
    expected = reference_sign(secret, ext, body, version).encode("ascii")
    return hmac.compare_digest(expected, given_signature.encode("utf-8", "replace"))


# --- generated requests ------------------------------------------------------------------------------------

_key = st.one_of(
    st.sampled_from(["a", "b", "c", "topic", "AccessKey", "SecurityToken", UNIQUE_KEY_QUERY, "Z", "é", "\U0001f600"]),
    st.text(min_size=1, max_size=8),
)
_fields = st.dictionaries(_key.filter(lambda k: k != SIGNATURE), st.text(max_size=24), max_size=12)
_secret = st.text(min_size=1, max_size=80)  # > 64 bytes of UTF-8: HMAC hashes the key first
_body = st.one_of(st.just(b""), st.binary(max_size=64), st.binary(min_size=1024, max_size=1100))
_version = st.one_of(st.none(), st.sampled_from([0, 398, 399, 400, 475]), st.integers(-5, 1000))


def _malform(signature: str, how: int) -> str:
    return [
        signature.rstrip("="),
        signature + " ",
        signature.lower(),
        signature[:-2] + ("AA" if signature[-2:] != "AA" else "BA"),
        "",
        "not base64 at all \u00e9",
        signature + "\x00",
    ][how % 7]


@settings(max_examples=400, deadline=None)
@given(
    secret=_secret,
    other=_secret,
    ext=_fields,
    body=_body,
    version=_version,
    alteration=st.integers(0, 9),
    detail=st.integers(0, 1000),
)
def test_sign_and_verify_answer_as_the_reference(
    secret: str, other: str, ext: dict[str, str], body: bytes, version: int | None, alteration: int, detail: int
) -> None:
    signed = dict(ext)
    signed[SIGNATURE] = sign(secret, ext, body, version)
    assert signed[SIGNATURE] == reference_sign(secret, ext, body, version)
    request, request_body = dict(signed), body
    if alteration == 1:  # forged: signed with another secret
        request[SIGNATURE] = reference_sign(other, ext, body, version)
    elif alteration == 2:  # the body altered under a valid signature
        request_body = (body[:-1] + bytes([(body[-1] + 1) % 256])) if body else b"x"
    elif alteration == 3 and ext:  # a field's value altered
        key = sorted(ext)[detail % len(ext)]
        request[key] = request[key] + "x"
    elif alteration == 4 and ext:  # a field missing
        del request[sorted(ext)[detail % len(ext)]]
    elif alteration == 5:  # a field added
        request["added" + str(detail)] = "v"
    elif alteration == 6:  # no signature
        del request[SIGNATURE]
    elif alteration == 7:  # a malformed signature
        request[SIGNATURE] = _malform(request[SIGNATURE], detail)
    elif alteration == 8:  # the arrival order of the keys reversed: the same content
        request = dict(reversed(list(request.items())))
    want = reference_verify(secret, request, request_body, version)
    assert verify(secret, request, request_body, version) is want
    assert verify_with(hmac_pads(secret), request, request_body, version) is want
    if alteration in (0, 8):
        assert want  # a valid signature verifies, whatever the keys' arrival order


def test_the_reference_matches_rocketmq_s_published_vector() -> None:
    # the same vector as tests/protocol/test_signature.py: the reference is the rule, not a copy of the code
    ext = {"topic": "TopicTest", "producerGroup": "PG", "AccessKey": "RocketMQ"}
    assert reference_sign("12345678", ext, b"", None) == sign("12345678", ext)


# --- the checker: guard (fast path) against check with the reference signature -----------------------------


class ReferenceChecker(AuthChecker):
    """`check` with the reference signature and the stateful trust kept in its own table."""

    def __init__(self, settings_: AuthSettings, store: AuthStore) -> None:
        super().__init__(settings_, store)
        self.trusted: dict[tuple[int, str], tuple[float, int]] = {}

    def _signed(self, user: User, cmd: RemotingCommand, conn: Any) -> bool:
        lifetime = self.settings.stateful_seconds
        counter = self.store.data_version.counter
        if lifetime is not None and conn is not None:
            entry = self.trusted.get((id(conn), user.username))
            if entry is not None and entry[1] == counter and time.monotonic() < entry[0]:
                return True
        if not reference_verify(user.password, cmd.ext_fields, cmd.body, cmd.version):
            return False
        if lifetime is not None and conn is not None:
            self.trusted[(id(conn), user.username)] = (time.monotonic() + lifetime, counter)
        return True


class _Conn:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.auth: ConnectionAuth | None = None


USERS = {"alice": "alicesecret", "bob": "bobsecret1"}
SIGNERS = [
    Credentials("alice", "alicesecret"),
    Credentials("alice", "not-alices-secret"),  # forged
    Credentials("bob", "bobsecret1"),
    Credentials("ghost", "ghostsecret"),  # unknown user
    Credentials("alice", "alicesecret2"),  # alice's second password
    None,  # unsigned
]
TOPICS = ["Orders", "Payments", "%RETRY%PG", ""]
CODES = [310, 10, 320, 11]  # SEND_MESSAGE_V2, SEND_MESSAGE, SEND_BATCH_MESSAGE, PULL_MESSAGE
IPS = ["10.0.0.7", "10.0.0.8"]


def _frame(creds: Credentials | None, topic: str, code: int, body: bytes, alteration: int) -> bytes:
    """A request as a signing client puts it on the wire, then altered as a man in the middle would."""
    topic_key = "topic" if code in (10, 11) else "b"
    ext = {"a": "PG", topic_key: topic, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
           "h": "0", "i": "UNIQ_KEY\x01AC1100010000\x02", "j": "0", "k": "false"}  # fmt: skip
    if code == 11:
        ext = {"consumerGroup": "CG", "topic": topic, "queueId": "1", "queueOffset": "0", "maxMsgNums": "32"}
    cmd = RemotingCommand(code=code, opaque=1, ext_fields=ext, body=body)
    if creds is not None:
        sign_command(cmd, creds)
    fields = dict(cmd.ext_fields)
    if alteration == 1:  # body altered
        cmd.body = (body[:-1] + bytes([(body[-1] + 1) % 256])) if body else b"x"
    elif alteration == 2:  # the topic altered
        fields[topic_key] = "Payments" if topic != "Payments" else "Orders"
    elif alteration == 3:  # a signed field missing
        fields.pop("a", None)
        fields.pop("consumerGroup", None)
    elif alteration == 4 and SIGNATURE in fields:  # malformed signature
        fields[SIGNATURE] = fields[SIGNATURE].rstrip("=") + "!"
    elif alteration == 5:  # no signature
        fields.pop(SIGNATURE, None)
    elif alteration == 6:  # no AccessKey
        fields.pop(ACCESS_KEY, None)
    elif alteration == 7:  # AccessKey swapped to another user
        fields[ACCESS_KEY] = "bob" if fields.get(ACCESS_KEY) != "bob" else "alice"
    cmd.ext_fields = fields
    return encode_binary(cmd)[4:]


def _apply(store: AuthStore, change: int) -> None:
    entry = PolicyEntry(Resource.parse("Topic:Orders"), (Action.PUB,))
    deny = PolicyEntry(Resource.parse("Topic:Orders"), (Action.PUB,), (), Decision.DENY)
    only_ip = PolicyEntry(Resource.parse("Topic:*"), (Action.PUB, Action.SUB), ("10.0.0.7",))
    if 1 <= change <= 6 and store.user("alice") is None:
        return  # alice was deleted: the store refuses changes of her (the next creation brings her back)
    if change == 1:
        store.update_user("alice", "alicesecret2", None, None)
    elif change == 2:
        store.update_user("alice", "alicesecret", None, None)
    elif change == 3:
        store.update_user("alice", "", None, UserStatus.DISABLE)
    elif change == 4:
        store.update_user("alice", "", None, UserStatus.ENABLE)
    elif change == 5:
        store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [deny])]))
    elif change == 6:
        store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [only_ip])]))
    elif change == 7 and store.user("alice") is not None:
        store.delete_user("alice")
    elif change == 8 and store.user("alice") is None:
        store.create_user(User("alice", USERS["alice"]))
    elif change == 9:
        store.replace_tables(
            [User(name, password).to_json() for name, password in USERS.items()],
            [Acl(name, [Policy(PolicyType.CUSTOM, [entry])]).to_json() for name in USERS],
        )


def _guarded(checker: AuthChecker, cmd: RemotingCommand, conn: _Conn) -> str | None:
    """The guard's answer as `_answer` gives it: None, or the refusal's remark."""
    refusal = checker.guard(conn, cmd)
    return None if refusal is None else refusal.remark


def _answer(check: Any, cmd: RemotingCommand, ip: str, conn: _Conn) -> str | None:
    try:
        check(cmd, ip, conn)
    except AuthError as exc:
        return str(exc)
    return None


# drawn with repeats so that valid sends of one user and topic come often enough to take the fast path
_step = st.tuples(
    st.sampled_from([0, 0, 0, 0, 1, 2, 2, 3, 4, 5]),  # signer
    st.sampled_from([0, 0, 0, 1, 2, 3]),  # topic
    st.sampled_from([0, 0, 1, 2, 3]),  # code
    st.sampled_from([0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7]),  # alteration (0: none)
    st.integers(0, 1),  # ip
    st.sampled_from([0] * 40 + list(range(1, 10))),  # a change of the tables before the request (0: none)
    st.binary(max_size=8),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=10, max_size=60), stateful=st.booleans())
def test_the_checker_answers_as_the_plain_reference(steps: list[tuple[int, ...]], stateful: bool) -> None:
    store = AuthStore(None)
    _apply(store, 9)
    settings_ = AuthSettings(
        authentication=True, authorization=True, cluster="C1", stateful_seconds=60.0 if stateful else None
    )
    fast, reference = AuthChecker(settings_, store), ReferenceChecker(settings_, store)
    conns = {ip: _Conn(f"{ip}:50000") for ip in IPS}
    for signer, topic, code, alteration, ip_at, change, tail in steps:
        _apply(store, change)
        body = b"x" * 1000 + bytes(tail)  # type: ignore[arg-type]
        frame = _frame(SIGNERS[signer], TOPICS[topic], CODES[code], body, alteration)
        ip = IPS[ip_at]
        got = _guarded(fast, decode_frame(frame), conns[ip])
        want = _answer(reference.check, decode_frame(frame), ip, conns[ip])
        assert got == want, (signer, topic, code, alteration, ip, change, got, want)


def test_the_generated_sequences_reach_both_answers_and_the_fast_path() -> None:
    """A fixed sequence of the generator's kind: accepted sends go the fast path, forged ones are refused there."""
    store = AuthStore(None)
    _apply(store, 9)
    for stateful in (None, 60.0):
        checker = AuthChecker(AuthSettings(authentication=True, authorization=True, stateful_seconds=stateful), store)
        conn = _Conn("10.0.0.7:1")
        good = _frame(SIGNERS[0], "Orders", 310, b"x" * 1024, 0)
        for _ in range(3):
            assert _guarded(checker, decode_frame(good), conn) is None
        assert conn.auth is not None and conn.auth.sends
        forged = _frame(SIGNERS[1], "Orders", 310, b"x" * 1024, 0)
        altered = _frame(SIGNERS[0], "Orders", 310, b"x" * 1024, 1)
        if stateful is None:  # stateful: the connection's trust covers them, as RocketMQ's strategy does
            for frame in (forged, altered):
                assert _guarded(checker, decode_frame(frame), conn) == (
                    "check signature failed. (User:alice, request code 310)"
                )
        assert "check signature failed" in (_guarded(checker, decode_frame(forged), _Conn("10.0.0.7:2")) or "")
