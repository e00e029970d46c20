"""ACL 2.0 model tables (broker/auth/model.py, requests.py, store.py, checker.py): resource matching, the winner
among matching entries, the per-request derivation, and the checker's refusals on hostile input."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from broker.auth.checker import AuthChecker, AuthSettings
from broker.auth.model import (
    Acl,
    Action,
    AuthError,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
    ip_in,
    winner,
)
from broker.auth.requests import derive
from broker.auth.settings import parse_stateful
from broker.auth.store import AuthStore
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials, sign_command

A, P, S = Action, Action.PUB, Action.SUB


@pytest.mark.parametrize(
    ("entry", "request_resource", "matches"),
    [
        ("*", "Topic:T", True),
        ("*", "Group:G", True),
        ("Topic:*", "Topic:anything", True),
        ("Topic:*", "Group:T", False),
        ("Topic:T", "Topic:T", True),
        ("Topic:T", "Topic:T2", False),
        ("Topic:pre*", "Topic:prefix", True),
        ("Topic:pre*", "Topic:pre", True),
        ("Topic:pre*", "Topic:pr", False),
        ("Group:G", "Group:G", True),
        ("Group:%RETRY%G", "Group:G", True),
        ("Cluster:C", "Cluster:C", True),
        ("Cluster:C", "Topic:C", False),
    ],
)
def test_resource_matching(entry: str, request_resource: str, matches: bool) -> None:
    assert Resource.parse(entry).matches(Resource.parse(request_resource)) is matches


@pytest.mark.parametrize("bad", ["", "  ", "Bogus:x", "Topic", ":x", "Any:x"])
def test_bad_resources_are_refused(bad: str) -> None:
    with pytest.raises(AuthError):
        Resource.parse(bad)


def test_resource_keys_round_trip() -> None:
    for key in ("*", "Topic:*", "Topic:a", "Topic:a*", "Group:g", "Cluster:c"):
        assert Resource.parse(key).key == key
    assert Resource.parse("Topic:a*") == Resource(ResourceType.TOPIC, "a", ResourcePattern.PREFIXED)


def _e(resource: str, decision: Decision = Decision.ALLOW, actions: tuple[Action, ...] = (P,)) -> PolicyEntry:
    return PolicyEntry(Resource.parse(resource), actions, (), decision)


@pytest.mark.parametrize(
    ("entries", "winning"),
    [
        # a specific type before *
        ([_e("*", Decision.DENY), _e("Topic:*")], 1),
        # literal before prefixed before any
        ([_e("Topic:*", Decision.DENY), _e("Topic:ab*", Decision.DENY), _e("Topic:abc")], 2),
        ([_e("Topic:*", Decision.DENY), _e("Topic:ab*")], 1),
        # the longer prefix first
        ([_e("Topic:a*", Decision.DENY), _e("Topic:ab*")], 1),
        ([_e("Topic:ab*"), _e("Topic:a*", Decision.DENY)], 0),
        # exact ties: Deny wins, whichever comes first (the post-fix comparator's intent)
        ([_e("Topic:abc"), _e("Topic:abc", Decision.DENY)], 1),
        ([_e("Topic:abc", Decision.DENY), _e("Topic:abc")], 0),
        ([_e("Topic:a*"), _e("Topic:a*", Decision.DENY)], 1),
        ([_e("*"), _e("*", Decision.DENY)], 1),
    ],
)
def test_winner_ordering(entries: list[PolicyEntry], winning: int) -> None:
    assert winner(entries) is entries[winning]


def test_custom_before_default_and_action_matching() -> None:
    acl = Acl(
        "alice",
        [
            Policy(PolicyType.DEFAULT, [_e("Topic:*", Decision.ALLOW, (Action.ALL,))]),
            Policy(PolicyType.CUSTOM, [_e("Topic:secret", Decision.DENY, (P,)), _e("Topic:sub", Decision.ALLOW, (S,))]),
        ],
    )
    t = Resource.topic
    assert acl.decide(t("secret"), (P,), "1.2.3.4") is Decision.DENY
    # a CUSTOM entry for another action does not match: DEFAULT decides
    assert acl.decide(t("secret"), (S,), "1.2.3.4") is Decision.ALLOW
    assert acl.decide(t("sub"), (S,), "1.2.3.4") is Decision.ALLOW
    assert acl.decide(t("other"), (P,), "1.2.3.4") is Decision.ALLOW
    # the request needs any one of its actions; Any matches every entry with actions
    assert acl.decide(t("sub"), (P, S, Action.GET), "1.2.3.4") is Decision.ALLOW
    assert acl.decide(t("secret"), (Action.ANY,), "1.2.3.4") is Decision.DENY
    assert Acl("bob", [Policy(PolicyType.CUSTOM, [_e("Topic:x")])]).decide(t("y"), (P,), "1.2.3.4") is None


@pytest.mark.parametrize(
    ("ip", "pattern", "inside"),
    [
        ("10.0.0.5", "10.0.0.0/24", True),
        ("10.0.1.5", "10.0.0.0/24", False),
        ("10.0.0.5", "10.0.0.5", True),
        ("::ffff:10.0.0.5", "10.0.0.0/8", True),
        ("::1", "::1", True),
        ("garbage", "10.0.0.0/8", False),
        ("10.0.0.5", "garbage", False),
    ],
)
def test_source_ips(ip: str, pattern: str, inside: bool) -> None:
    assert ip_in(ip, pattern) is inside


def test_entry_source_ips_limit_the_match() -> None:
    entry = PolicyEntry(Resource.topic("T"), (P,), ("192.168.0.0/16",), Decision.ALLOW)
    assert entry.matches(Resource.topic("T"), (P,), "192.168.3.4")
    assert not entry.matches(Resource.topic("T"), (P,), "127.0.0.1")


def _cmd(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=dict(ext or {}), body=body)


def _keys(needs: list[tuple[Resource, tuple[Action, ...]]]) -> list[tuple[str, list[str]]]:
    return [(r.key, [a.label for a in acts]) for r, acts in needs]


rc = RequestCode


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        (_cmd(rc.SEND_MESSAGE_V2, {"a": "PG", "b": "T"}), [("Topic:T", ["Pub"])]),
        (_cmd(rc.SEND_MESSAGE_V2, {"a": "CG", "b": "%RETRY%CG"}), [("Group:CG", ["Sub"])]),
        (_cmd(rc.SEND_BATCH_MESSAGE, {"a": "PG", "b": "T"}), [("Topic:T", ["Pub"])]),
        (_cmd(rc.SEND_MESSAGE, {"producerGroup": "PG", "topic": "T"}), [("Topic:T", ["Pub"])]),
        (_cmd(rc.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"}), [("Topic:T", ["Sub"]), ("Group:G", ["Sub"])]),
        (_cmd(rc.PULL_MESSAGE, {"consumerGroup": "G", "topic": "%RETRY%G"}), [("Group:G", ["Sub"])]),
        (_cmd(rc.QUERY_MESSAGE, {"topic": "T"}), [("Topic:T", ["Sub", "Get"])]),
        (
            _cmd(rc.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T"}),
            [("Topic:T", ["Sub", "Update"]), ("Group:G", ["Sub", "Update"])],
        ),
        (
            _cmd(rc.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T"}),
            [("Topic:T", ["Sub", "Get"]), ("Group:G", ["Sub", "Get"])],
        ),
        (_cmd(rc.CONSUMER_SEND_MSG_BACK, {"group": "G"}), [("Group:G", ["Sub"])]),
        (_cmd(rc.END_TRANSACTION, {"topic": "T"}), [("Topic:T", ["Pub"])]),
        (_cmd(rc.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), [("Topic:T", ["Pub", "Sub", "Get"])]),
        (_cmd(rc.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}), [("Topic:T", ["Get"])]),
        (_cmd(rc.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}), [("Topic:T", ["Create"])]),
        (_cmd(rc.AUTH_CREATE_USER, {"username": "u"}), [("Cluster:C1", ["Update"])]),
        (_cmd(rc.AUTH_LIST_ACL), [("Cluster:C1", ["Get"])]),
        (_cmd(rc.UPDATE_BROKER_CONFIG), [("Cluster:C1", ["Update"])]),
        (_cmd(rc.GET_ALL_TOPIC_CONFIG), []),  # RocketMQ: a type without a field names no resource
        (_cmd(rc.GET_BROKER_RUNTIME_INFO), []),
        (
            _cmd(
                rc.HEART_BEAT,
                body=orjson.dumps(
                    {
                        "clientID": "c",
                        "consumerDataSet": [
                            {"groupName": "G", "subscriptionDataSet": [{"topic": "T"}, {"topic": "%RETRY%G"}]}
                        ],
                        "producerDataSet": [{"groupName": "PG"}],
                    }
                ),
            ),
            [("Group:G", ["Sub"]), ("Topic:T", ["Sub"])],
        ),
        (
            _cmd(rc.LOCK_BATCH_MQ, body=orjson.dumps({"consumerGroup": "G", "mqSet": [{"topic": "T", "queueId": 0}]})),
            [("Group:G", ["Sub"]), ("Topic:T", ["Sub"])],
        ),
    ],
)
def test_derivation(cmd: RemotingCommand, expected: list[tuple[str, list[str]]]) -> None:
    assert _keys(derive(cmd, "C1")) == expected


def test_derivation_of_a_garbled_body_is_a_refusal() -> None:
    with pytest.raises(AuthError, match="parse authorization context error"):
        derive(_cmd(rc.HEART_BEAT, body=b"\x00not json"), "C1")


# ----------------------------------------------------------------------------------- the checker


class _Conn:
    peer = "127.0.0.1:50000"


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    s = AuthStore(tmp_path)
    s.create_user(User("root", "rootsecret", UserType.SUPER))
    s.create_user(User("alice", "alicesecret"))
    s.create_user(User("dora", "dorasecret", UserType.NORMAL, UserStatus.DISABLE))
    s.put_acl(
        Acl(
            "alice",
            [
                Policy(
                    PolicyType.CUSTOM,
                    [_e("Topic:ok*", actions=(P, S)), _e("Topic:okno", Decision.DENY), _e("Group:G", actions=(S,))],
                )
            ],
        )
    )
    return s


def _signed(code: int, ext: dict[str, str], who: tuple[str, str] | None, body: bytes = b"") -> RemotingCommand:
    cmd = _cmd(code, ext, body)
    if who is not None:
        sign_command(cmd, Credentials(*who))
    return cmd


def _refusal(checker: AuthChecker, cmd: RemotingCommand) -> str | None:
    answer = checker.guard(_Conn(), cmd)
    if answer is None:
        return None
    assert answer.code == ResponseCode.NO_PERMISSION
    return answer.remark or ""


ALICE = ("alice", "alicesecret")
SEND = {"a": "PG", "b": "ok1"}


def test_checker_accepts_and_refuses(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, authorization=True, cluster="C1"), store)
    assert _refusal(checker, _signed(310, SEND, ALICE, b"x")) is None
    assert _refusal(checker, _signed(310, SEND, ("root", "rootsecret"), b"x")) is None
    deny = _refusal(checker, _signed(310, {"a": "PG", "b": "okno"}, ALICE))
    assert deny is not None and "User:alice" in deny and "Topic:okno" in deny and "Pub" in deny and "deny" in deny
    nomatch = _refusal(checker, _signed(310, {"a": "PG", "b": "other"}, ALICE))
    assert nomatch is not None and "no matched policies" in nomatch
    admin = _refusal(checker, _signed(rc.AUTH_CREATE_USER, {"username": "x"}, ALICE))
    assert admin is not None and "Cluster:C1" in admin and "Update" in admin


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: _signed(310, SEND, None), "username cannot be null"),  # missing AccessKey
        (lambda: _signed(310, SEND, ("mallory", "whatever1")), "User:mallory is not found"),
        (lambda: _signed(310, SEND, ("dora", "dorasecret")), "User:dora is disabled"),
        (lambda: _signed(310, SEND, ("alice", "wrongsecret")), "check signature failed"),  # forged
        (lambda: _tampered_body(), "check signature failed"),  # replayed on an altered body
        (lambda: _tampered_header(), "check signature failed"),
    ],
)
def test_hostile_requests(store: AuthStore, make: object, expected: str) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, authorization=True, cluster="C1"), store)
    remark = _refusal(checker, make())  # type: ignore[operator]
    assert remark is not None and expected in remark
    for secret in ("alicesecret", "rootsecret", "dorasecret", "wrongsecret"):
        assert secret not in remark


def _tampered_body() -> RemotingCommand:
    cmd = _signed(310, SEND, ALICE, b"original")
    cmd.body = b"altered!"
    return cmd


def _tampered_header() -> RemotingCommand:
    cmd = _signed(310, SEND, ALICE, b"x")
    cmd.ext_fields = {**cmd.ext_fields, "b": "okay-other"}
    return cmd


def test_whitelists_and_halves(store: AuthStore) -> None:
    only_authn = AuthChecker(AuthSettings(authentication=True, cluster="C1"), store)
    assert _refusal(only_authn, _signed(310, {"a": "PG", "b": "other"}, ALICE)) is None
    white = AuthChecker(
        AuthSettings(authentication=True, authorization=True, authentication_whitelist=frozenset({105}),
                     authorization_whitelist=frozenset({105}), cluster="C1"),
        store,
    )  # fmt: skip
    assert _refusal(white, _signed(105, {"topic": "x"}, None)) is None
    assert _refusal(white, _signed(310, SEND, None)) is not None


def test_decisions_follow_acl_changes(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, authorization=True, cluster="C1"), store)
    assert _refusal(checker, _signed(310, {"a": "PG", "b": "new"}, ALICE)) is not None
    store.put_acl(Acl("alice", [Policy(PolicyType.CUSTOM, [_e("Topic:new")])]))
    assert _refusal(checker, _signed(310, {"a": "PG", "b": "new"}, ALICE)) is None
    store.update_user("alice", "", None, UserStatus.DISABLE)
    assert "disabled" in (_refusal(checker, _signed(310, {"a": "PG", "b": "new"}, ALICE)) or "")


# ----------------------------------------------------------------------------------- the store


def test_store_round_trips_through_its_files(store: AuthStore, tmp_path: Path) -> None:
    again = AuthStore(tmp_path)
    again.load()
    assert again.users.keys() == store.users.keys()
    assert again.users["alice"] == store.users["alice"]
    assert again.acls["alice"].to_json() == store.acls["alice"].to_json()
    assert (tmp_path / "users.json").stat().st_mode & 0o077 == 0
    assert "alicesecret" not in repr(again.users["alice"])


def test_store_rules(store: AuthStore) -> None:
    with pytest.raises(AuthError, match="existed"):
        store.create_user(User("alice", "x"))
    with pytest.raises(AuthError, match="password can not be blank"):
        store.create_user(User("nopass", ""))
    with pytest.raises(AuthError, match="not exist"):
        store.put_acl(Acl("ghost", [Policy(PolicyType.CUSTOM, [_e("Topic:x")])]))
    store.delete_acl("User:alice", PolicyType.CUSTOM, Resource.parse("Topic:okno"))
    assert [e.resource.key for e in store.acls["alice"].policies[0].entries] == ["Topic:ok*", "Group:G"]
    store.delete_user("alice")
    assert "alice" not in store.acls
    store.delete_user("never-existed")


def _body(entry: dict[str, object], subject: str = "User:a") -> dict[str, object]:
    base: dict[str, object] = {"resource": "Topic:x", "actions": ["Pub"], "decision": "Allow"}
    return {"subject": subject, "policies": [{"entries": [{**base, **entry}]}]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"subject": "User:a", "policies": []}, "policies is empty"),
        (_body({}, subject="a"), "subject type"),
        (_body({"actions": ["Any"]}), "can not be Any"),
        (_body({"decision": "Maybe"}), "decision"),
        (_body({"sourceIps": ["1.2.3.999"]}), "source ip is invalid"),
        (_body({"resource": "Nope:x"}), "resource type"),
        ("not an object", "body of acl"),
    ],
)
def test_acl_bodies_are_validated(body: object, message: str) -> None:
    with pytest.raises(AuthError, match=message):
        Acl.from_json(body)


def _guard(checker: AuthChecker, conn: _Conn, cmd: RemotingCommand) -> str | None:
    answer = checker.guard(conn, cmd)
    return None if answer is None else answer.remark or ""


def test_the_stateful_strategy_trusts_a_verified_user_on_its_connection_only(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, cluster="C1", stateful_seconds=60.0), store)
    first, other = _Conn(), _Conn()
    forged = ("alice", "wrongsecret")
    assert _guard(checker, first, _signed(310, SEND, forged)) is not None  # nothing trusted before a good one
    assert _guard(checker, first, _signed(310, SEND, ALICE)) is None
    assert _guard(checker, first, _signed(310, SEND, forged)) is None  # the connection proved it is alice
    assert "check signature failed" in (_guard(checker, other, _signed(310, SEND, forged)) or "")
    # a user whose signature the connection never carried is checked
    assert "check signature failed" in (_guard(checker, first, _signed(310, SEND, ("root", "x"))) or "")
    # users changed (a new password, a disabled user): every connection proves itself again
    store.create_user(User("bob", "bobsecret1"))
    assert "check signature failed" in (_guard(checker, first, _signed(310, SEND, forged)) or "")
    assert _guard(checker, first, _signed(310, SEND, ALICE)) is None


def test_the_stateful_trust_expires(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, cluster="C1", stateful_seconds=0.05), store)
    conn = _Conn()
    assert _guard(checker, conn, _signed(310, SEND, ALICE)) is None
    time.sleep(0.1)
    assert "check signature failed" in (_guard(checker, conn, _signed(310, SEND, ("alice", "wrongsecret"))) or "")


def test_the_stateless_default_checks_every_request(store: AuthStore) -> None:
    checker = AuthChecker(AuthSettings(authentication=True, cluster="C1"), store)
    conn = _Conn()
    assert _guard(checker, conn, _signed(310, SEND, ALICE)) is None
    assert "check signature failed" in (_guard(checker, conn, _signed(310, SEND, ("alice", "wrongsecret"))) or "")


@pytest.mark.parametrize(
    ("text", "stateful"),
    [
        ("", False),
        ("org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy", False),
        ("org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy", True),
        ("StatefulAuthenticationStrategy", True),
        ("Nonsense", None),
    ],
)
def test_authentication_strategy_key(text: str, stateful: bool | None) -> None:
    if stateful is None:
        with pytest.raises(ValueError, match="authenticationStrategy"):
            parse_stateful(text)
    else:
        assert parse_stateful(text) is stateful
