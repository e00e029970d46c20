"""RocketUser: the model's refusals (hostile specs), the ACL body and the per-broker steps (tables), and the
handler against a real NameServer and a broker with authentication and authorization on (tests/local_cluster.py),
with an in-memory stand-in for the Kubernetes API (objects, Secrets, status, Events). A client signing with the
Secret the operator wrote is served where the rules allow and refused elsewhere; a rotated secret and a deleted
RocketUser take effect on the broker."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from broker.client import ClientConfig, Credentials, Message, Producer
from broker.client.admin import Admin
from broker.client.admin import auth as admin_auth
from broker.client.errors import RocketError
from rocketcluster import handlers, names
from rocketcluster.handlers_users import reconcile_user, remove_user
from rocketcluster.model import SpecError
from rocketcluster.model_users import parse_user_spec
from rocketcluster.render_security import auth_properties, operator_secret_name
from rocketcluster.render_users import UserSteps, acl_body, plan_user, render_user_secret
from tests.local_cluster import local_cluster

OPERATOR = Credentials("rocketcluster-operator", "operator-Secret-123")


# -- the model ---------------------------------------------------------------------------------------------------


def _rule(**extra: Any) -> dict[str, Any]:
    return {"resource": {"type": "Topic", "name": "orders"}, "actions": ["Pub"], **extra}


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({}, "spec.clusterRef", "Field required"),
        ({"clusterRef": "Demo"}, "spec.clusterRef", "pattern"),
        ({"clusterRef": "demo", "username": "a:b"}, "spec.username", "pattern"),
        ({"clusterRef": "demo", "username": "x" * 65}, "spec.username", "at most 64"),
        ({"clusterRef": "demo", "userType": "Admin"}, "spec.userType", "'Super' or 'Normal'"),
        ({"clusterRef": "demo", "acls": {"resource": "Topic:a"}}, "spec.acls", "valid list"),
        ({"clusterRef": "demo", "acls": [_rule(actions=[])]}, "spec.acls[0].actions", "at least 1"),
        ({"clusterRef": "demo", "acls": [_rule(actions=["Publish"])]}, "spec.acls[0].actions[0]", "'Pub'"),
        ({"clusterRef": "demo", "acls": [_rule(actions=["Pub", "Pub"])]}, "spec.acls[0].actions", "at most once"),
        ({"clusterRef": "demo", "acls": [_rule(decision="allow")]}, "spec.acls[0].decision", "'Allow'"),
        ({"clusterRef": "demo", "acls": [_rule(sourceIps=["10.0.0.300"])]}, "spec.acls[0].sourceIps", "not an IP"),
        ({"clusterRef": "demo", "acls": [_rule(sourceIps=["1" * 100])]}, "spec.acls[0].sourceIps", "not an IP"),
        (
            {"clusterRef": "demo", "acls": [{"resource": {"type": "Topic", "name": "a b"}, "actions": ["Pub"]}]},
            "spec.acls[0].resource.name",
            "pattern",
        ),
        (
            {"clusterRef": "demo", "acls": [{"resource": {"type": "Queue", "name": "a"}, "actions": ["Pub"]}]},
            "spec.acls[0].resource.type",
            "'Cluster', 'Topic' or 'Group'",
        ),
        (
            {
                "clusterRef": "demo",
                "acls": [{"resource": {"type": "Topic", "patternType": "Prefixed"}, "actions": ["Sub"]}],
            },
            "spec.acls[0].resource",
            "needs a name prefix",
        ),
        ({"clusterRef": "demo", "userType": "Super", "acls": [_rule()]}, "spec", "Super user is allowed everything"),
        ({"clusterRef": "demo", "acls": [_rule(), _rule(decision="Deny")]}, "spec", "both about Topic:orders"),
        ({"clusterRef": "demo", "acls": [_rule()] * 65}, "spec.acls", "at most 64"),
        ({"clusterRef": "demo", "password": "x"}, "spec.password", "unknown field"),
        ({"clusterRef": "demo", "acls": [_rule(extra=1)]}, "spec.acls[0].extra", "unknown field"),
    ],
)
def test_hostile_user_specs_are_refused_naming_the_field(spec: Any, path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_user_spec(spec)
    assert path in [p for p, _ in caught.value.problems], caught.value.problems
    assert words in str(caught.value)


@pytest.mark.parametrize("raw", [None, [], "x", 3])
def test_a_spec_that_is_no_object_is_refused(raw: Any) -> None:
    if raw is None:
        with pytest.raises(SpecError, match="clusterRef"):
            parse_user_spec(raw)
    else:
        with pytest.raises(SpecError, match="must be an object"):
            parse_user_spec(raw)


def test_the_acl_body_names_each_rule_as_rocketmq_does() -> None:
    spec = parse_user_spec(
        {
            "clusterRef": "demo",
            "acls": [
                {"resource": {"type": "Topic", "name": "orders"}, "actions": ["Pub", "Sub"]},
                {"resource": {"type": "Topic", "name": "ord", "patternType": "Prefixed"}, "actions": ["Sub"]},
                {"resource": {"type": "Group"}, "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"]},
                {"resource": {"type": "Cluster", "name": "demo"}, "actions": ["All"], "decision": "Deny"},
            ],
        }
    )
    assert acl_body("alice", spec) == {
        "subject": "User:alice",
        "policies": [
            {
                "policyType": "Custom",
                "entries": [
                    {"resource": "Topic:orders", "actions": ["Pub", "Sub"], "decision": "Allow"},
                    {"resource": "Topic:ord*", "actions": ["Sub"], "decision": "Allow"},
                    {"resource": "Group:*", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"},
                    {"resource": "Cluster:demo", "actions": ["All"], "decision": "Deny"},
                ],
            }
        ],
    }


_SPEC = parse_user_spec({"clusterRef": "demo", "acls": [_rule()]})
_NO_RULES = parse_user_spec({"clusterRef": "demo"})
_USER = {"username": "alice", "password": "pw", "userType": "Normal", "userStatus": "enable"}
_ACL = {
    "subject": "User:alice",
    "policies": [
        {"policyType": "Custom", "entries": [{"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"}]}
    ],
}


@pytest.mark.parametrize(
    ("user", "acl", "spec", "password", "steps"),
    [
        (None, None, _SPEC, "pw", UserSteps("create", "create")),
        (_USER, _ACL, _SPEC, "pw", UserSteps()),
        ({**_USER, "password": "old"}, _ACL, _SPEC, "pw", UserSteps("update", None)),
        ({**_USER, "userType": "Super"}, _ACL, _SPEC, "pw", UserSteps("update", None)),
        ({**_USER, "userStatus": "disable"}, _ACL, _SPEC, "pw", UserSteps("update", None)),
        (_USER, None, _SPEC, "pw", UserSteps(None, "create")),
        (
            _USER,
            {**_ACL, "policies": [{"policyType": "Custom", "entries": []}]},
            _SPEC,
            "pw",
            UserSteps(None, "create"),
        ),
        (
            _USER,
            {"policies": [{"entries": [{"resource": "Topic:orders", "actions": ["Pub", "Sub"], "decision": "Allow"}]}]},
            _SPEC,
            "pw",
            UserSteps(None, "replace"),
        ),
        (
            _USER,
            {"policies": [{"entries": [{"resource": "Topic:orders", "actions": "Pub", "decision": "Deny"}]}]},
            _SPEC,
            "pw",
            UserSteps(None, "replace"),
        ),
        (_USER, _ACL, _NO_RULES, "pw", UserSteps(None, "delete")),
        (_USER, None, _NO_RULES, "pw", UserSteps()),
        # a Default policy (not the operator's) is not read as the user's rules
        (
            _USER,
            {"policies": [{"policyType": "Default", "entries": [{"resource": "Topic:orders"}]}]},
            _NO_RULES,
            "pw",
            UserSteps(),
        ),
    ],
)
def test_the_steps_for_one_broker(user: Any, acl: Any, spec: Any, password: str, steps: UserSteps) -> None:
    assert plan_user(user, acl, spec, password) == steps


def test_the_user_secret_is_owned_by_the_rocketuser() -> None:
    body = {"metadata": {"name": "alice", "namespace": "ns", "uid": "u-1"}, "spec": {"clusterRef": "demo"}}
    secret = render_user_secret(body, "alice", "pw")
    assert secret["metadata"]["name"] == "alice-credentials"
    assert secret["metadata"]["ownerReferences"][0] == {
        "apiVersion": names.API_VERSION,
        "kind": names.USER_KIND,
        "name": "alice",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert secret["stringData"] == {"accessKey": "alice", "secretKey": "pw"}


# -- the handler against a real broker ---------------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class FakeKube:
    """The calls handlers_users and cluster_access make, on a dict of objects by (kind, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[tuple[str, str, str]] = []
        self.pods = [
            {
                "metadata": {"name": "u-nameserver-0", "labels": {names.LABEL_COMPONENT: names.COMPONENT_NAMESERVER}},
                "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
            }
        ]

    def add(self, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
            "spec": spec,
        }
        self.objects[(kind, name)] = body
        return body

    def put_secret(self, obj: Mapping[str, Any]) -> None:
        data = {k: _b64(v) for k, v in (obj.get("stringData") or {}).items()}
        self.objects[("Secret", obj["metadata"]["name"])] = {"metadata": dict(obj["metadata"]), "data": data}

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.objects.get((kind, name))
        return copy.deepcopy(found) if found is not None else None

    async def list(self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]) -> list[Any]:
        assert kind == "Pod"
        return copy.deepcopy(self.pods)

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        assert method == "POST" and path == "/api/v1/namespaces/ns/secrets", (method, path)
        if ("Secret", body["metadata"]["name"]) in self.objects:
            from rocketcluster.kube import ApiError

            raise ApiError(409, "AlreadyExists", "exists")
        self.put_secret(body)

    async def apply(self, obj: Mapping[str, Any]) -> Any:
        assert obj["kind"] == "Secret"
        self.put_secret(obj)

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], kind: str = "") -> Any:
        body = self.objects[(kind, name)]
        body["status"] = {**(body.get("status") or {}), **status}

    async def post_event(self, about: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


SECURED = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "innerClientAuthenticationCredentials": json.dumps(
        {"accessKey": OPERATOR.access_key, "secretKey": OPERATOR.secret_key}
    ),
}


def _ready(kube: FakeKube, name: str) -> dict[str, Any]:
    status = kube.objects[(names.USER_KIND, name)]["status"]
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def _send(namesrv: str, credentials: Credentials | None, topic: str) -> bool:
    config = ClientConfig(namesrv_addr=namesrv, credentials=credentials)
    producer = Producer(f"pg-{topic}", client_config=config)
    await producer.start()
    try:
        await producer.send(Message(topic, b"hello"))
        return True
    except RocketError as exc:
        assert credentials is None or credentials.secret_key not in str(exc)
        return False
    finally:
        await producer.shutdown()


def test_a_user_is_created_signs_where_allowed_rotates_and_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube = FakeKube()
    monkeypatch.setattr(handlers, "_kube", kube)

    async def main() -> None:
        async with local_cluster(tmp_path, cluster_name="u", broker_name="u-0", **SECURED) as cluster:
            namesrv = cluster.namesrv_addr
            monkeypatch.setattr(names, "NAMESERVER_PORT", int(namesrv.rsplit(":", 1)[1]))
            kube.add(
                names.KIND, "u", {"security": {"authentication": {"enabled": True}, "authorization": {"enabled": True}}}
            )
            kube.put_secret(
                {
                    "metadata": {"name": operator_secret_name("u")},
                    "stringData": {
                        "accessKey": OPERATOR.access_key,
                        "secretKey": OPERATOR.secret_key,
                        "auth.properties": auth_properties(OPERATOR.access_key, OPERATOR.secret_key),
                    },
                }
            )
            async with Admin(client_config=ClientConfig(namesrv_addr=namesrv, credentials=OPERATOR)) as admin:
                for topic in ("orders", "secret-topic"):
                    await admin.create_topic(topic, cluster="u", read_queue_nums=2, write_queue_nums=2)
                    for _ in range(200):
                        if topic in await admin.topic_list():
                            break
                        await asyncio.sleep(0.05)

            body = kube.add(
                names.USER_KIND,
                "alice",
                {"clusterRef": "u", "acls": [{"resource": {"type": "Topic", "name": "orders"}, "actions": ["Pub"]}]},
            )
            await reconcile_user(body)
            ready = _ready(kube, "alice")
            assert (ready["status"], ready["reason"]) == ("True", "Ready"), ready
            stored = kube.objects[(names.USER_KIND, "alice")]["status"]
            assert (stored["username"], stored["secret"], stored["brokerNames"]) == (
                "alice",
                "alice-credentials",
                ["u-0"],
            )
            data = kube.objects[("Secret", "alice-credentials")]["data"]
            alice = Credentials(
                base64.b64decode(data["accessKey"]).decode(), base64.b64decode(data["secretKey"]).decode()
            )
            assert alice.access_key == "alice" and len(alice.secret_key) >= 32
            # the password appears in no status, Event or condition
            assert alice.secret_key not in json.dumps(kube.objects[(names.USER_KIND, "alice")]) + str(kube.events)

            assert await _send(namesrv, alice, "orders")
            assert not await _send(namesrv, alice, "secret-topic")  # no rule allows it
            assert not await _send(namesrv, None, "orders")  # unsigned
            assert not await _send(namesrv, Credentials("alice", "wrong-password"), "orders")

            events = len(kube.events)
            await reconcile_user(kube.objects[(names.USER_KIND, "alice")])  # nothing changed: nothing done
            assert len(kube.events) == events, kube.events[events:]

            # a second rule, then rotation: the Secret's secretKey edited by hand
            body = kube.objects[(names.USER_KIND, "alice")]
            rule = {"resource": {"type": "Topic", "name": "secret", "patternType": "Prefixed"}, "actions": ["Pub"]}
            body["spec"]["acls"].append(rule)
            body["metadata"]["generation"] = 2
            kube.objects[("Secret", "alice-credentials")]["data"]["secretKey"] = _b64("rotated-Password-1")
            await reconcile_user(body)
            assert _ready(kube, "alice")["reason"] == "Ready"
            assert await _send(namesrv, Credentials("alice", "rotated-Password-1"), "secret-topic")
            assert not await _send(namesrv, alice, "orders")  # the old password no longer works

            await remove_user(kube.objects[(names.USER_KIND, "alice")])
            async with Admin(client_config=ClientConfig(namesrv_addr=namesrv, credentials=OPERATOR)) as admin:
                addr = (await admin.cluster_info()).masters("u")[0]
                assert await admin_auth.get_user(admin.instance.api, addr, "alice") is None
                with pytest.raises(RocketError, match="subject is not exist"):  # RocketMQ's words for no user
                    await admin_auth.get_acl(admin.instance.api, addr, "User:alice")
            assert not await _send(namesrv, Credentials("alice", "rotated-Password-1"), "orders")
            assert kube.events[-1][1] == "Deleted"

    asyncio.run(main())


def test_a_user_of_a_missing_cluster_or_with_a_bad_name_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube()
    monkeypatch.setattr(handlers, "_kube", kube)

    async def main() -> None:
        await reconcile_user(kube.add(names.USER_KIND, "bob", {"clusterRef": "nowhere"}))
        assert _ready(kube, "bob")["reason"] == "ClusterNotFound"
        await reconcile_user(kube.add(names.USER_KIND, "bad.name", {"clusterRef": "nowhere"}))
        ready = _ready(kube, "bad.name")
        assert ready["reason"] == "InvalidSpec" and "set spec.username" in ready["message"]
        await reconcile_user(kube.add(names.USER_KIND, "carol", {"clusterRef": "x", "userType": "Root"}))
        assert _ready(kube, "carol")["reason"] == "InvalidSpec"
        assert ("Warning", "InvalidSpec") in {(t, r) for t, r, _ in kube.events}

    asyncio.run(main())


def test_kopf_sees_a_watch_and_a_deletion_handler_for_users_and_no_timer() -> None:
    """Every RocketUser gets kopf's finalizer (its on.delete handler has no filter): a revoked user must not keep
    its access because the operator was down when it was deleted. No timer or daemon; the resync is the hook."""
    import kopf

    from rocketcluster import handlers_users

    registry = kopf.get_default_registry()
    changing = [
        h for h in registry._changing.get_all_handlers() if h.selector and h.selector.any_name == names.USER_PLURAL
    ]
    assert [(h.reason, h.field, h.value) for h in changing] == [("delete", None, None)]
    spawning = registry._spawning.get_all_handlers()
    assert not [h for h in spawning if h.selector and h.selector.any_name == names.USER_PLURAL]
    assert names.USER_PLURAL in {h.selector.any_name for h in registry._watching.get_all_handlers() if h.selector}
    assert handlers_users.schedule_all in handlers.RESYNC_HOOKS
