"""The active-replica check against a real kube-apiserver (the fixture of test_crd_apiserver, which installs
every CRD `crd.manifests()` makes, kopf's peering ones included): `Leadership.active` reads the peering objects
kopf writes, and a pass of our own loops on a standby replica does nothing while the same pass on the active
replica reconciles the cluster."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest

from rocketcluster import handlers
from rocketcluster.peering import Leadership
from tests.operator.test_crd_apiserver import NAMESPACE, Kubectl, _cluster
from tests.operator.test_crd_apiserver import kubectl as kubectl  # the module-scoped API server fixture


def _keepalive(priority: int, seconds_ago: float = 1) -> dict[str, Any]:
    seen = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return {"priority": priority, "lifetime": 30, "lastseen": seen.isoformat()}


def _peering(kubectl: Kubectl, kind: str, status: dict[str, Any]) -> str:
    name = f"p-{uuid.uuid4().hex[:6]}"
    metadata = {"name": name} | ({"namespace": NAMESPACE} if kind == "KopfPeering" else {})
    kubectl.ok("create", "-f", "-", input=json.dumps({"apiVersion": "kopf.dev/v1", "kind": kind, "metadata": metadata}))
    # no status subresource: kopf patches the status as part of the object, as this does
    patch = json.dumps({"status": status})
    where = ["-n", NAMESPACE] if kind == "KopfPeering" else []
    kubectl.ok("patch", kind.lower(), name, *where, "--type=merge", "-p", patch)
    return name


@pytest.mark.parametrize("kind", ["ClusterKopfPeering", "KopfPeering"])
@pytest.mark.parametrize(
    ("others", "active"),
    [
        ({}, True),
        ({"other": (3, 1)}, True),
        ({"other": (9, 1)}, False),
        ({"other": (5, 1)}, False),  # a tie: kopf pauses both
        ({"other": (9, 60)}, True),  # its keep-alive expired
    ],
)
async def test_active_reads_the_peering_object(
    kubectl: Kubectl, kind: str, others: dict[str, Any], active: bool
) -> None:
    # (priority, seconds since its keep-alive): the times are taken now, not when the tests were collected
    status = {"me": _keepalive(5)} | {peer: _keepalive(*entry) for peer, entry in others.items()}
    name = _peering(kubectl, kind, status)
    namespaces = [NAMESPACE] if kind == "KopfPeering" else None
    kube = kubectl.api_client()
    try:
        assert await Leadership(name, "me", namespaces, priority=5).active(kube) is active
    finally:
        await kube.close()


async def test_a_missing_peering_object_outranks_nobody(kubectl: Kubectl) -> None:
    kube = kubectl.api_client()
    try:
        assert await Leadership("absent", "me", [NAMESPACE], priority=1).active(kube) is True
    finally:
        await kube.close()


async def test_a_standby_pass_does_nothing_and_the_active_one_reconciles(
    kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube = kubectl.api_client()
    name = f"c{uuid.uuid4().hex[:6]}"
    kubectl.ok("create", "-f", "-", input=json.dumps(_cluster(name, {"nameServer": {"replicas": 1}})))
    peering = _peering(kubectl, "KopfPeering", {"me": _keepalive(5), "other": _keepalive(9)})
    monkeypatch.setattr(handlers, "_kube", kube)

    def statefulsets() -> list[str]:
        out = kubectl.ok("get", "statefulsets", "-n", NAMESPACE, "-l", f"rocketcluster.io/cluster={name}", "-o", "name")
        return out.split()

    # the pass a resync tick or a pod event starts, on the standby: no read of the cluster, no child
    monkeypatch.setattr(handlers, "leadership", Leadership(peering, "me", [NAMESPACE], priority=5))
    await handlers.passes.run_once((NAMESPACE, name))
    assert statefulsets() == []
    assert "status" not in json.loads(kubectl.ok("get", "rmq", name, "-n", NAMESPACE, "-o", "json"))

    # the same pass once this replica outranks the other: the cluster's children are applied, the status written
    monkeypatch.setattr(handlers, "leadership", Leadership(peering, "me", [NAMESPACE], priority=10))
    await handlers.passes.run_once((NAMESPACE, name))
    assert statefulsets(), "the active replica's pass built nothing"
    assert json.loads(kubectl.ok("get", "rmq", name, "-n", NAMESPACE, "-o", "json"))["status"]["conditions"]
    await kube.close()
