"""rocketcluster.cluster_access: the operator's Secret made once and never overwritten, the secrets hash that
follows the certificate, the admin client's settings, and cert-manager detection; with an in-memory stand-in for
the Kubernetes API (the calls it makes: get and create)."""

from __future__ import annotations

import asyncio
import base64
import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rocketcluster import cluster_access, gather
from rocketcluster.kube import ApiError
from rocketcluster.model import parse_spec
from rocketcluster.names import ClusterRef
from rocketcluster.render_security import auth_properties

CLUSTER = ClusterRef("demo", "ns", "uid-1")
AUTH = {"security": {"authentication": {"enabled": True}}}
AUTH_TLS = {"security": {"authentication": {"enabled": True}, "tls": {"enabled": True, "secretName": "cert"}}}


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.creates = 0
        self.forbidden: set[str] = set()

    def put(self, kind: str, name: str, data: Mapping[str, str]) -> None:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        self.objects[(kind, name)] = {"metadata": {"name": name}, "data": encoded}

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        if kind in self.forbidden:
            raise ApiError(403, "Forbidden", "no")
        found = self.objects.get((kind, name))
        return copy.deepcopy(found) if found is not None else None

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        assert (method, path) == ("POST", "/api/v1/namespaces/ns/secrets")
        self.creates += 1
        name = body["metadata"]["name"]
        if ("Secret", name) in self.objects:
            raise ApiError(409, "AlreadyExists", "exists")
        self.put("Secret", name, body["stringData"])


def test_the_operator_secret_is_made_once_and_kept() -> None:
    kube = FakeKube()
    spec = parse_spec(AUTH)

    async def main() -> None:
        ref, access = await cluster_access.prepare(kube, CLUSTER, spec)  # type: ignore[arg-type]
        assert kube.creates == 1 and access.credentials is not None
        assert access.credentials.access_key == "rocketcluster-operator"
        secret = access.credentials.secret_key
        assert len(secret) >= 40 and secret not in repr(access)
        assert ref.secrets_hash and (ref.name, ref.uid) == ("demo", "uid-1")
        again, access2 = await cluster_access.prepare(kube, CLUSTER, spec)  # type: ignore[arg-type]
        assert kube.creates == 1 and access2.credentials == access.credentials
        assert again.secrets_hash == ref.secrets_hash
        # another replica made it between our get and our create: theirs is used
        other = FakeKube()
        made = {"accessKey": "rocketcluster-operator", "secretKey": "x" * 43}
        made["auth.properties"] = auth_properties(made["accessKey"], made["secretKey"])
        other.put("Secret", "demo-operator-credentials", made)
        original_get = other.get
        calls = 0

        async def get_missing_once(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return None if calls == 1 else await original_get(*args)

        other.get = get_missing_once  # type: ignore[method-assign]
        _, raced = await cluster_access.prepare(other, CLUSTER, spec)  # type: ignore[arg-type]
        assert raced.credentials is not None and raced.credentials.secret_key == "x" * 43

    asyncio.run(main())


def test_an_open_cluster_needs_nothing() -> None:
    kube = FakeKube()
    ref, access = asyncio.run(cluster_access.prepare(kube, CLUSTER, parse_spec({})))  # type: ignore[arg-type]
    assert ref == CLUSTER and access == cluster_access.AdminAccess() and kube.creates == 0


def test_a_renewed_certificate_changes_the_hash_and_its_ca_is_used(tmp_path: Any) -> None:
    kube = FakeKube()
    spec = parse_spec(AUTH_TLS)

    async def main() -> None:
        with pytest.raises(cluster_access.SecretMissing, match="secretName: Secret cert is not in ns"):
            await cluster_access.prepare(kube, CLUSTER, spec)  # type: ignore[arg-type]
        # cert-manager's Secret, not issued yet: TLS without a CA to check against
        issuer = parse_spec({"security": {"tls": {"enabled": True, "issuerRef": {"name": "ca"}}}})
        missing, access = await cluster_access.prepare(kube, CLUSTER, issuer)  # type: ignore[arg-type]
        assert access.use_tls and access.ca_file is None and access.credentials is None
        config = access.client_config("10.0.0.1:9876")
        assert config.use_tls and not config.tls_verify and not config.tls_check_hostname
        kube.put("Secret", "cert", {"tls.crt": "A", "tls.key": "K", "ca.crt": "-----CA one-----\n"})
        first, access = await cluster_access.prepare(kube, CLUSTER, spec)  # type: ignore[arg-type]
        assert access.ca_file is not None and Path(access.ca_file).read_text() == "-----CA one-----\n"
        config = access.client_config("10.0.0.1:9876")
        assert config.tls_verify and config.tls_ca_file == access.ca_file and not config.tls_check_hostname
        assert config.credentials == access.credentials
        kube.put("Secret", "cert", {"tls.crt": "B", "tls.key": "K2", "ca.crt": "-----CA one-----\n"})
        second, _ = await cluster_access.prepare(kube, CLUSTER, spec)  # type: ignore[arg-type]
        assert len({missing.secrets_hash, first.secrets_hash, second.secrets_hash}) == 3
        os.unlink(access.ca_file)

    asyncio.run(main())


_OK = {"accessKey": "rocketcluster-operator", "secretKey": "s" * 43}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        # auth.properties names the users the brokers know: without it nothing can sign, nothing is replaced
        ({"accessKey": "rocketcluster-operator"}, "has no auth.properties"),
        ({"accessKey": "", "secretKey": "s"}, "has no auth.properties"),
        ({**_OK}, "has no auth.properties"),
        ({**_OK, "auth.properties": "initAuthenticationUser=oops\n"}, "initAuthenticationUser is missing"),
    ],
)
def test_a_damaged_operator_secret_is_reported_not_replaced(data: dict[str, str], why: str) -> None:
    kube = FakeKube()
    kube.put("Secret", "demo-operator-credentials", data)
    with pytest.raises(cluster_access.SecretMissing, match=why):
        asyncio.run(cluster_access.prepare(kube, CLUSTER, parse_spec(AUTH)))  # type: ignore[arg-type]
    assert kube.creates == 0
    with pytest.raises(cluster_access.SecretMissing):
        asyncio.run(cluster_access.admin_access(kube, "ns", "demo", parse_spec(AUTH)))  # type: ignore[arg-type]


def test_secret_data_skips_values_that_are_not_base64_text() -> None:
    secret = {
        "data": {"good": base64.b64encode(b"v").decode(), "bad": "!!!", "binary": base64.b64encode(b"\xff").decode()}
    }
    assert cluster_access.secret_data(secret) == {"good": "v"}
    assert cluster_access.secret_data(None) is None
    assert cluster_access.secret_data({}) == {}


def test_an_issuer_without_cert_manager_is_unbuildable() -> None:
    spec = parse_spec({"security": {"tls": {"enabled": True, "issuerRef": {"name": "ca"}}}})
    kube = FakeKube()
    problem = asyncio.run(gather.unbuildable(kube, spec))  # type: ignore[arg-type]
    assert problem is not None and problem[0] == "CertManagerMissing"
    assert "certificates.cert-manager.io" in problem[1] and "secretName" in problem[1]
    kube.objects[("CustomResourceDefinition", "certificates.cert-manager.io")] = {"metadata": {}}
    assert asyncio.run(gather.unbuildable(kube, spec)) is None  # type: ignore[arg-type]
    forbidden = FakeKube()
    forbidden.forbidden.add("CustomResourceDefinition")  # not allowed to look: the Certificate's apply will tell
    assert asyncio.run(gather.unbuildable(forbidden, spec)) is None  # type: ignore[arg-type]


def test_an_edited_secret_key_asks_for_a_rotation_and_rolls_nothing_by_itself() -> None:
    """A new secretKey (tests/operator/test_credentials_rotation.py has the rotation's steps): the operator keeps
    signing with auth.properties' inner user, and the pods' hash does not move until the operator writes the file."""
    kube = FakeKube()
    steady = {**_OK, "auth.properties": auth_properties("rocketcluster-operator", "s" * 43)}
    kube.put("Secret", "demo-operator-credentials", steady)
    before, _ = asyncio.run(cluster_access.prepare(kube, CLUSTER, parse_spec(AUTH)))  # type: ignore[arg-type]
    kube.put("Secret", "demo-operator-credentials", {**steady, "secretKey": "a-new-one"})
    after, access = asyncio.run(cluster_access.prepare(kube, CLUSTER, parse_spec(AUTH)))  # type: ignore[arg-type]
    assert before.secrets_hash == after.secrets_hash
    assert access.credentials is not None and access.credentials.secret_key == "s" * 43
