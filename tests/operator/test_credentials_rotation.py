"""Rotation of the operator's own credentials (rocketcluster.plan_credentials): the steps as a table, and a walk
through a whole rotation in which every file is loaded by the real NameServer and broker auth code (ServerAuth,
AuthStore on disk) to show that, in every roll, a pod on either side accepts what the others sign with."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.auth.service import ServerAuth
from broker.config.properties import parse_properties
from broker.namesrv.config import NamesrvConfig
from broker.protocol.signature import Credentials
from broker.server.config import load_broker_config
from rocketcluster.model import parse_spec
from rocketcluster.names import ClusterRef
from rocketcluster.plan_credentials import (
    RETIRED_KEY,
    CredentialsError,
    RotationStep,
    hashed_view,
    next_access_key,
    parse_auth_file,
    pods_rolled,
    rotation_step,
)
from rocketcluster.render import render_broker_conf, render_nameserver_conf
from rocketcluster.render_security import AUTH_FILE, OPERATOR_USER, auth_properties, secrets_hash

NAME = "demo-operator-credentials"
OLD = Credentials(OPERATOR_USER, "old-secret")
NEW = Credentials(f"{OPERATOR_USER}-g2", "new-secret")
FRESH = "fresh-random"


def _secret(want: Credentials, init: Credentials, inner: Credentials, **extra: str) -> dict[str, str]:
    text = auth_properties(init.access_key, init.secret_key, inner=(inner.access_key, inner.secret_key))
    return {"accessKey": want.access_key, "secretKey": want.secret_key, AUTH_FILE: text, **extra}


def _pair(data: dict[str, str] | None) -> tuple[str, str]:
    auth = parse_auth_file(data, NAME)
    return auth.init.access_key, auth.inner.access_key


STEADY = _secret(OLD, OLD, OLD)
ASKED_NEW_SECRET = {**STEADY, "secretKey": "new-secret"}
ASKED_DELETED = {k: v for k, v in STEADY.items() if k != "secretKey"}
NEW_OLD = _secret(NEW, NEW, OLD)
OLD_NEW = _secret(NEW, OLD, NEW)
RETIRING = _secret(NEW, NEW, NEW, **{RETIRED_KEY: OPERATOR_USER})


@pytest.mark.parametrize(
    ("data", "rolled", "phase", "sign", "create", "delete", "written"),
    [
        (STEADY, True, "steady", OLD, None, None, None),
        (STEADY, False, "steady", OLD, None, None, None),  # a roll for another reason: nothing to do
        (ASKED_NEW_SECRET, True, "start", OLD, NEW, None, (NEW.access_key, OLD.access_key)),
        (ASKED_NEW_SECRET, False, "start", OLD, NEW, None, (NEW.access_key, OLD.access_key)),
        (ASKED_DELETED, True, "start", OLD, Credentials(NEW.access_key, FRESH), None, (NEW.access_key, OLD.access_key)),
        (NEW_OLD, False, "rolling", OLD, None, None, None),
        (NEW_OLD, True, "advance", OLD, None, None, (OLD.access_key, NEW.access_key)),
        (OLD_NEW, False, "rolling", NEW, None, None, None),
        (OLD_NEW, True, "finish", NEW, None, None, (NEW.access_key, NEW.access_key)),
        (RETIRING, False, "rolling", NEW, None, None, None),
        (RETIRING, True, "cleanup", NEW, None, OPERATOR_USER, (NEW.access_key, NEW.access_key)),
        # a new request during the last roll waits for its cleanup, which keeps the request
        ({**RETIRING, "secretKey": "third"}, True, "cleanup", NEW, None, OPERATOR_USER, (NEW.access_key,) * 2),
    ],
)
def test_each_state_gives_its_step(
    data: dict[str, str],
    rolled: bool,
    phase: str,
    sign: Credentials,
    create: Credentials | None,
    delete: str | None,
    written: tuple[str, str] | None,
) -> None:
    step = rotation_step(data, NAME, rolled=rolled, fresh_secret=FRESH)
    assert step.phase == phase
    assert (step.sign.access_key, step.sign.secret_key) == (sign.access_key, sign.secret_key)
    assert (None if step.create_user is None else (step.create_user.access_key, step.create_user.secret_key)) == (
        None if create is None else (create.access_key, create.secret_key)
    )
    assert step.delete_user == delete
    assert (None if step.secret is None else _pair(step.secret)) == written
    assert step.wait_for_roll == (phase == "rolling")
    if step.secret is not None and phase != "cleanup":
        assert RETIRED_KEY not in step.secret or phase == "finish"


def test_cleanup_keeps_a_new_request_and_drops_only_the_retired_key() -> None:
    asked = {**RETIRING, "secretKey": "third"}
    step = rotation_step(asked, NAME, rolled=True, fresh_secret=FRESH)
    assert step.secret == {k: v for k, v in asked.items() if k != RETIRED_KEY}
    # the next pass starts the next rotation from it
    again = rotation_step(step.secret, NAME, rolled=True, fresh_secret=FRESH)
    assert again.phase == "start" and again.create_user is not None
    assert (again.create_user.access_key, again.create_user.secret_key) == (f"{OPERATOR_USER}-g3", "third")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (None, "has no auth.properties"),
        ({"accessKey": "a", "secretKey": "b"}, "has no auth.properties"),
        ({AUTH_FILE: "initAuthenticationUser=not json\n"}, "initAuthenticationUser is missing or is not"),
        ({AUTH_FILE: 'initAuthenticationUser={"username":"u","password":"p"}\n'}, "innerClientAuthentication"),
        ({AUTH_FILE: 'initAuthenticationUser={"username":"u","password":""}\n'}, "initAuthenticationUser"),
        ({AUTH_FILE: 'initAuthenticationUser=["u","p"]\n'}, "initAuthenticationUser"),
        # edited during a rotation: matches neither user of the file
        ({**NEW_OLD, "secretKey": "something else"}, "was edited during a rotation"),
        ({k: v for k, v in OLD_NEW.items() if k != "secretKey"}, "was edited during a rotation"),
    ],
)
def test_a_broken_secret_is_refused_without_its_secrets(data: dict[str, str] | None, words: str) -> None:
    with pytest.raises(CredentialsError, match=words) as caught:
        rotation_step(data, NAME, rolled=True, fresh_secret=FRESH)
    assert NAME in str(caught.value)
    for secret in ("old-secret", "new-secret", "something else", FRESH):
        assert secret not in str(caught.value)


@pytest.mark.parametrize(
    ("current", "following"),
    [
        (OPERATOR_USER, f"{OPERATOR_USER}-g2"),
        (f"{OPERATOR_USER}-g2", f"{OPERATOR_USER}-g3"),
        (f"{OPERATOR_USER}-g41", f"{OPERATOR_USER}-g42"),
        ("someone-else", f"{OPERATOR_USER}-g2"),
    ],
)
def test_the_new_user_has_a_new_name(current: str, following: str) -> None:
    assert next_access_key(current) == following


@pytest.mark.parametrize(
    ("pods", "expected", "rolled"),
    [
        ([("h", True), ("h", True), ("h", True)], 3, True),
        ([("h", True), ("h", True)], 3, False),  # one pod is missing
        ([("h", True), ("old", True), ("h", True)], 3, False),  # one pod runs with the old Secret
        ([("h", True), ("h", False), ("h", True)], 3, False),  # one pod is not ready
        ([("h", True), (None, True), ("h", True)], 3, False),  # a pod without the annotation
        ([], 0, True),
    ],
)
def test_rolled_means_every_pod_ready_with_the_current_hash(
    pods: list[tuple[str | None, bool]], expected: int, rolled: bool
) -> None:
    assert pods_rolled(pods, expected, "h") is rolled


def test_a_steady_secret_hashes_as_before_and_a_request_alone_rolls_nothing() -> None:
    assert secrets_hash({NAME: hashed_view(STEADY)}) == secrets_hash({NAME: STEADY})
    assert secrets_hash({NAME: hashed_view(ASKED_NEW_SECRET)}) == secrets_hash({NAME: STEADY})
    assert secrets_hash({NAME: hashed_view(ASKED_DELETED)}) == secrets_hash({NAME: STEADY})
    assert secrets_hash({NAME: hashed_view(RETIRING)}) == secrets_hash({NAME: hashed_view(_secret(NEW, NEW, NEW))})
    hashes = {secrets_hash({NAME: hashed_view(d)}) for d in (STEADY, NEW_OLD, OLD_NEW, RETIRING)}
    assert len(hashes) == 4  # each file the pods read rolls them
    assert hashed_view(None) is None


# --- a whole rotation, each file loaded by the real servers' auth code ---

SPEC = parse_spec({"security": {"authentication": {"enabled": True}, "authorization": {"enabled": True}}})
CLUSTER = ClusterRef("demo", "mq", "uid-1")


def _nameserver_users(auth_file: str, tmp: Path) -> ServerAuth:
    props = parse_properties(render_nameserver_conf(SPEC) + auth_file)
    props["kvConfigPath"] = str(tmp / "kv.json")
    server = ServerAuth.of_namesrv(NamesrvConfig.from_properties(props))
    server.load()
    return server


def _broker(auth_file: str, store_dir: Path) -> ServerAuth:
    """A broker started on `auth_file` with the store in `store_dir` (kept across its restarts)."""
    config = load_broker_config(parse_properties(render_broker_conf(CLUSTER, SPEC, 0, 0) + auth_file))
    server = ServerAuth.of_broker(config.broker, store_dir)
    server.load()
    return server


def _accepts(server: ServerAuth, who: Credentials) -> bool:
    user = server.store.user(who.access_key)
    return user is not None and user.password == who.secret_key


def _apply(step: RotationStep, master: ServerAuth) -> None:
    """What the glue does on a master (credentials_rotation): create or delete the operator's user."""
    from broker.auth.model import User, UserType

    if step.create_user is not None:
        master.store.create_user(User(step.create_user.access_key, step.create_user.secret_key, UserType.SUPER))
    if step.delete_user is not None:
        master.store.delete_user(step.delete_user)


def test_a_whole_rotation_keeps_every_pod_and_the_operator_accepted_in_every_roll(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    data: dict[str, str] = dict(STEADY)
    master = _broker(data[AUTH_FILE], store)
    data["secretKey"] = "new-secret"  # the user asks for a rotation
    files = [data[AUTH_FILE]]
    phases = []
    for _ in range(10):
        step = rotation_step(data, NAME, rolled=True, fresh_secret=FRESH)
        phases.append(step.phase)
        if step.phase == "steady":
            break
        _apply(step, master)
        assert step.secret is not None
        previous, data = data[AUTH_FILE], step.secret
        if data[AUTH_FILE] == previous:
            continue  # the cleanup writes no new file: nothing rolls
        files.append(data[AUTH_FILE])
        # the roll: some pods run on the previous file, some on the next, in any order
        for nameserver_file in (previous, data[AUTH_FILE]):
            nameserver = _nameserver_users(nameserver_file, tmp_path)
            for broker_file in (previous, data[AUTH_FILE]):
                broker = _broker(broker_file, store)  # a restart on that file, over the same store
                inner = broker.credentials
                assert inner is not None
                assert _accepts(nameserver, inner), (phases, "registration refused")
                assert _accepts(broker, inner) and _accepts(master, inner), (phases, "slave sync refused")
            signed = rotation_step(data, NAME, rolled=False, fresh_secret=FRESH).sign
            assert _accepts(nameserver, signed), (phases, "the operator's NameServer write refused")
            assert _accepts(master, signed), (phases, "the operator's admin request refused")
    assert phases == ["start", "advance", "finish", "cleanup", "steady"]
    assert len(files) == 4  # three rolls
    master = _broker(data[AUTH_FILE], store)
    assert sorted(master.store.users) == [NEW.access_key]  # the old user is gone
    assert _pair(data) == (NEW.access_key, NEW.access_key) and data["secretKey"] == "new-secret"
    assert not _accepts(_nameserver_users(data[AUTH_FILE], tmp_path), OLD)
