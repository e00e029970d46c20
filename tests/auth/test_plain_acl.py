"""ACL 1.0 (broker/auth/plain.py): plain_acl.yml semantics, hot reload, hostile files keeping the last good
config, address patterns, and the migration to ACL 2.0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.auth.checker import AuthChecker, AuthSettings
from broker.auth.model import Action, Decision, Resource
from broker.auth.plain import MAX_FILE_BYTES, PlainAcl, address_matcher, migrate_to_v2
from broker.auth.store import AuthStore
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials, sign_command

GOOD = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def _home(tmp_path: Path, text: str = GOOD) -> Path:
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "plain_acl.yml").write_text(text)
    return tmp_path


def _cmd(code: int, ext: dict[str, str], who: tuple[str, str] | None = ("RocketMQ", "12345678")) -> RemotingCommand:
    cmd = RemotingCommand(code=code, ext_fields=dict(ext), body=b"body")
    if who is not None:
        sign_command(cmd, Credentials(*who))
    return cmd


def _send(topic: str) -> dict[str, str]:
    return {"a": "PG", "b": topic}


def test_plain_acl_semantics(tmp_path: Path) -> None:
    plain = PlainAcl(_home(tmp_path))
    assert plain.load()
    ip = "127.0.0.1"
    assert plain.check(_cmd(310, _send("topicB")), ip) is None
    assert "No permission for topic:topicA" in (plain.check(_cmd(310, _send("topicA")), ip) or "")
    assert "No permission for topic:topicC" in (plain.check(_cmd(310, _send("topicC")), ip) or "")
    assert "No default permission for topic:other" in (plain.check(_cmd(310, _send("other")), ip) or "")
    pull = {"consumerGroup": "groupB", "topic": "topicC"}
    assert plain.check(_cmd(11, pull), ip) is None  # groupB by defaultGroupPerm SUB
    assert "group:groupA" in (plain.check(_cmd(11, {**pull, "consumerGroup": "groupA"}), ip) or "")
    assert "Need admin permission for request code=17" in (plain.check(_cmd(17, {"topic": "x"}), ip) or "")
    assert "Check signature failed" in (plain.check(_cmd(310, _send("topicB"), ("RocketMQ", "wrong-one")), ip) or "")
    assert "No accessKey" in (plain.check(_cmd(310, _send("topicB"), None), ip) or "")
    assert "No acl config for nobody12" in (plain.check(_cmd(310, _send("topicB"), ("nobody12", "x")), ip) or "")
    # global white address: no check at all; account white address: no signature check
    assert plain.check(_cmd(310, _send("topicA"), None), "10.10.103.7") is None
    assert plain.check(_cmd(17, {}, ("rocketmq2", "wrong-one")), "192.168.1.9") is None
    assert plain.check(_cmd(17, {}, ("rocketmq2", "12345678")), ip) is None  # admin
    # the trace topic bypass
    assert plain.check(_cmd(310, _send("RMQ_SYS_TRACE_TOPIC")), ip) is None


def test_v1_refusals_answer_system_error(tmp_path: Path) -> None:
    plain = PlainAcl(_home(tmp_path))
    plain.load()
    checker = AuthChecker(AuthSettings(), AuthStore(None), plain)

    class Conn:
        peer = "127.0.0.1:4000"

    answer = checker.guard(Conn(), _cmd(310, _send("topicA")))
    assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR
    assert (answer.remark or "").startswith("org.apache.rocketmq.acl.common.AclException: No permission")
    assert "12345678" not in (answer.remark or "")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("accounts: [", "not valid YAML"),
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 123\n", "longer than 6"),
        ("accounts: 5\n", "not a list"),
        ("- just\n- a list\n", "not a mapping"),
        ("accounts:\n  - !!python/object/apply:os.system ['true']\n", "not valid YAML"),
        ("a: &a [*a, *a, *a]\naccounts: []\n", None),  # an alias loop: read without blowing up, no accounts
    ],
)
def test_hostile_files_keep_the_last_good_config(tmp_path: Path, bad: str, says: str | None) -> None:
    home = _home(tmp_path)
    plain = PlainAcl(home)
    assert plain.load()
    (home / "conf" / "plain_acl.yml").write_text(bad)
    os.utime(home / "conf" / "plain_acl.yml", ns=(1, 1))
    reloaded = plain.reload_if_changed()
    if says is None:
        return
    assert not reloaded and says in (plain.last_error or "")
    assert "RocketMQ" in plain.config.accounts  # the last good config stays
    assert "12345678" not in (plain.last_error or "")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    home = _home(tmp_path)
    plain = PlainAcl(home)
    plain.load()
    (home / "conf" / "plain_acl.yml").write_text(GOOD + "#" * (MAX_FILE_BYTES + 1))
    assert not plain.reload_if_changed()
    assert "more than" in (plain.last_error or "") and "RocketMQ" in plain.config.accounts


def test_hot_reload_and_acl_dir(tmp_path: Path) -> None:
    home = _home(tmp_path)
    plain = PlainAcl(home)
    plain.load()
    assert not plain.reload_if_changed()
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "team.yaml").write_text("accounts:\n  - accessKey: teamuser1\n    secretKey: teamsecret\n")
    (home / "conf" / "acl" / "tools.yml").write_text("accessKey: ignored\nsecretKey: ignored\n")
    assert plain.reload_if_changed()
    assert set(plain.config.accounts) == {"RocketMQ", "rocketmq2", "teamuser1"}


@pytest.mark.parametrize(
    ("pattern", "ip", "matches"),
    [
        ("*", "1.2.3.4", True),
        ("192.168.1.*", "192.168.1.77", True),
        ("192.168.1.*", "192.168.2.77", False),
        ("192.168.1.1-100", "192.168.1.50", True),
        ("192.168.1.1-100", "192.168.1.150", False),
        ("192.168.1.{1,2,3}", "192.168.1.2", True),
        ("192.168.1.{1,2,3}", "192.168.1.4", False),
        ("10.0.0.1,10.0.0.2", "10.0.0.2", True),
        ("10.0.0.1", "10.0.0.1", True),
        ("", "10.0.0.1", False),
    ],
)
def test_address_patterns(pattern: str, ip: str, matches: bool) -> None:
    assert address_matcher(pattern)(ip) is matches


def test_migration_to_v2(tmp_path: Path) -> None:
    plain = PlainAcl(_home(tmp_path))
    plain.load()
    store = AuthStore(None)
    assert migrate_to_v2(plain, store) == 2
    assert store.users["rocketmq2"].is_super and not store.users["RocketMQ"].is_super
    acl = store.acls["RocketMQ"]
    assert acl.decide(Resource.topic("topicA"), (Action.PUB,), "1.1.1.1") is Decision.DENY
    assert acl.decide(Resource.topic("topicB"), (Action.SUB,), "1.1.1.1") is Decision.ALLOW
    assert acl.decide(Resource.topic("other"), (Action.PUB,), "1.1.1.1") is Decision.DENY  # DEFAULT Topic:* DENY
    assert acl.decide(Resource.group("groupZ"), (Action.SUB,), "1.1.1.1") is Decision.ALLOW
    assert migrate_to_v2(plain, store) == 0  # existing users are left alone
