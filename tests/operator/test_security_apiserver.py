"""spec.security and RocketUser on a real kube-apiserver (the harness's binaries; skipped without them): the API
server refuses what the models refuse, with messages naming the field, and accepts the valid forms.
The API server and etcd are the ones tests/operator/test_crd_apiserver.py starts (its module fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from rocketcluster.model import SpecError, parse_spec
from rocketcluster.model_users import parse_user_spec
from tests.operator.test_crd_apiserver import NAMESPACE, Kubectl, kubectl  # noqa: F401  (the fixture)

pytestmark = pytest.mark.k8s


def _cluster(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketCluster",
        "metadata": {"name": "sec", "namespace": NAMESPACE},
        "spec": spec,
    }


def _user(name: str, spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


_TOPIC_PUB = {"resource": {"type": "Topic", "name": "orders"}, "actions": ["Pub"]}

_CLUSTERS_REFUSED = [
    ("authorization without authentication", {"authorization": {"enabled": True}}, "needs authentication.enabled"),
    ("tls without a source", {"tls": {"enabled": True}}, "needs secretName"),
    ("tls with both sources", {"tls": {"secretName": "a", "issuerRef": {"name": "b"}}}, "not both"),
    ("issuer without a name", {"tls": {"enabled": True, "issuerRef": {"kind": "Issuer"}}}, "name: Required value"),
    (
        "issuer of a wrong kind",
        {"tls": {"enabled": True, "issuerRef": {"name": "a", "kind": "Vault"}}},
        "Unsupported value",
    ),
    ("a string for a bool", {"authentication": {"enabled": "yes"}}, "must be of type boolean"),
    ("a bad Secret name", {"tls": {"enabled": True, "secretName": "Bad_Name"}}, "should match"),
    (
        "an unknown field",
        {"tls": {"enabled": True, "secretName": "a", "verify": False}},
        'unknown field "spec.security.tls.verify"',
    ),
]


@pytest.mark.parametrize(
    ("security", "words"), [r[1:] for r in _CLUSTERS_REFUSED], ids=[r[0] for r in _CLUSTERS_REFUSED]
)
def test_the_api_server_refuses_hostile_security(kubectl: Kubectl, security: Any, words: str) -> None:  # noqa: F811
    with pytest.raises(SpecError):
        parse_spec({"security": security})
    done = kubectl.apply(_cluster({"security": security}), dry_run=True)
    assert done.returncode != 0, f"accepted: {security}"
    assert words in done.stderr, done.stderr


def test_the_api_server_accepts_each_security_form(kubectl: Kubectl) -> None:  # noqa: F811
    for security in (
        {"authentication": {"enabled": True}, "authorization": {"enabled": True}},
        {"tls": {"enabled": True, "secretName": "sec-cert"}},
        {"tls": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}},
    ):
        parse_spec({"security": security})
        done = kubectl.apply(_cluster({"security": security}), dry_run=True)
        assert done.returncode == 0, done.stderr


_USERS_REFUSED = [
    ("no cluster", "u1", {}, "clusterRef: Required value"),
    ("a colon in the name", "u2", {"clusterRef": "c", "username": "a:b"}, "should match"),
    ("a dotted metadata.name", "a.b", {"clusterRef": "c"}, "metadata.name is the user name"),
    ("an unknown type", "u3", {"clusterRef": "c", "userType": "Root"}, "Unsupported value"),
    ("a Super with rules", "u4", {"clusterRef": "c", "userType": "Super", "acls": [_TOPIC_PUB]}, "Super user"),
    (
        "an unknown action",
        "u5",
        {"clusterRef": "c", "acls": [{**_TOPIC_PUB, "actions": ["Publish"]}]},
        "Unsupported value",
    ),
    ("no action", "u6", {"clusterRef": "c", "acls": [{**_TOPIC_PUB, "actions": []}]}, "should have at least 1 items"),
    (
        "an action twice",
        "u7",
        {"clusterRef": "c", "acls": [{**_TOPIC_PUB, "actions": ["Pub", "Pub"]}]},
        "Duplicate value",
    ),
    (
        "a prefix of everything",
        "u8",
        {"clusterRef": "c", "acls": [{"resource": {"type": "Topic", "patternType": "Prefixed"}, "actions": ["Sub"]}]},
        "Prefixed pattern needs a name prefix",
    ),
    (
        "a bad resource name",
        "u9",
        {"clusterRef": "c", "acls": [{"resource": {"type": "Topic", "name": "a b"}, "actions": ["Pub"]}]},
        "should match",
    ),
    ("too many rules", "u10", {"clusterRef": "c", "acls": [_TOPIC_PUB] * 65}, "must have at most 64 items"),
    ("a number for a name", "u11", {"clusterRef": "c", "username": 7}, "must be of type string"),
]


@pytest.mark.parametrize(("name", "spec", "words"), [r[1:] for r in _USERS_REFUSED], ids=[r[0] for r in _USERS_REFUSED])
def test_the_api_server_refuses_hostile_users(kubectl: Kubectl, name: str, spec: Any, words: str) -> None:  # noqa: F811
    if name != "a.b":
        with pytest.raises(SpecError):
            parse_user_spec(spec)
    done = kubectl.apply(_user(name, spec), dry_run=True)
    assert done.returncode != 0, f"accepted: {spec}"
    assert words in done.stderr, done.stderr


def test_a_user_is_accepted_and_its_name_and_cluster_cannot_change(kubectl: Kubectl) -> None:  # noqa: F811
    spec = {
        "clusterRef": "c",
        "acls": [_TOPIC_PUB, {"resource": {"type": "Group"}, "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"]}],
    }
    parse_user_spec(spec)
    assert kubectl.apply(_user("alice", spec)).returncode == 0
    for changed, field in (
        ({**spec, "clusterRef": "d"}, "spec.clusterRef"),
        ({**spec, "username": "bob"}, "spec.username"),
    ):
        done = kubectl.apply(_user("alice", changed), dry_run=True)
        assert done.returncode != 0 and field in done.stderr and "cannot change" in done.stderr, done.stderr
