"""RocketTopic and RocketConsumerGroup on the node tier: real brokers, checked over the wire from the node.

One light RocketCluster (1 NameServer, groups without slaves, ephemeral storage, the image of this tree) serves
the module:
- a RocketTopic makes the topic on the group's master with the queues asked for (GET_ALL_TOPIC_CONFIG); scaling the
  cluster to 2 groups gives the new group the topic; editing the queues changes them on both; deleting it with
  deletionPolicy Delete removes it from both masters and from the NameServer's route;
- a topic made by hand before its RocketTopic is adopted, not overwritten (Differs, status.adopted), until the
  spec is edited; deleting it with Retain keeps it;
- a RocketConsumerGroup's retryMaxTimes and groupRetryPolicy are what each master gives back
  (GET_ALL_SUBSCRIPTIONGROUP_CONFIG); deleted with Delete it goes, with Retain it stays.
The operator's log must hold no traceback.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from broker.client.admin import Admin
from broker.client.admin import requests as admin_requests
from broker.client.errors import RocketError
from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

CLUSTER = "rt"
T = TypeVar("T")


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    name = f"resources-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE.parent))  # all three CRDs
    for crd in ("rocketclusters", "rockettopics", "rocketconsumergroups"):
        k8s_node.wait_established(f"{crd}.rocketcluster.io")
    k8s_node.run("create", "namespace", name)
    yield name
    for kind in ("rmqt", "rmqg", "rmq"):
        k8s_node.run("delete", kind, "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_node.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    k8s_node: Kube, ns: str, broker_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        # topics and groups first, while the cluster still runs: a Delete policy needs its brokers
        yield proc
        for kind in ("rmqt", "rmqg"):
            k8s_node.run("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=90s", check=False, timeout=120)


@pytest.fixture(scope="module")
def namesrv(k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess) -> str:
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0},
        "storage": {"type": "ephemeral", "size": "1Gi"},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
    k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    k8s_node.wait_for(
        "the cluster Ready", lambda: ready_status(k8s_node, ns, CLUSTER, groups=1), timeout=300, interval=1
    )
    ip = k8s_node.run("get", "-n", ns, "svc", f"{CLUSTER}-nameserver", "-o", "jsonpath={.spec.clusterIP}").strip()
    return f"{ip}:9876"


def _admin(namesrv: str, call: Callable[[Admin], Awaitable[T]]) -> T:
    async def run() -> T:
        async with Admin(namesrv) as admin:
            return await call(admin)

    return asyncio.run(run())


def _held(namesrv: str, what: str, name: str) -> dict[str, dict[str, Any] | None]:
    """brokerName -> the topic's (or group's) config on that group's master, None where it has none."""

    async def call(admin: Admin) -> dict[str, dict[str, Any] | None]:
        info = await admin.cluster_info()
        out: dict[str, dict[str, Any] | None] = {}
        for broker_name in info.clusters.get(CLUSTER, []):
            addr = info.brokers[broker_name].broker_addrs[0]
            if what == "topic":
                topics = await admin_requests.get_all_topic_configs(admin.instance.api, addr)
                out[broker_name] = topics[name].to_json() if name in topics else None
            else:
                groups = await admin_requests.get_all_subscription_groups(admin.instance.api, addr)
                out[broker_name] = groups.get(name)
        return out

    return _admin(namesrv, call)


def _apply(kube: Kube, ns: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    kube.apply(json.dumps(body), namespace=ns)


def _ready(kube: Kube, ns: str, short: str, name: str) -> dict[str, Any] | None:
    """The Ready condition once the status describes the current generation."""
    obj = kube.get("-n", ns, short, name)
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)


def _wait_reason(kube: Kube, ns: str, short: str, name: str, reason: str, timeout: float = 90) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        ready = _ready(kube, ns, short, name)
        return ready if ready is not None and ready["reason"] == reason else None

    found: dict[str, Any] = kube.wait_for(f"{short} {name} {reason}", seen, timeout=timeout, interval=1)
    return found


def _queues(config: dict[str, Any] | None) -> tuple[int, int] | None:
    return None if config is None else (config["readQueueNums"], config["writeQueueNums"])


def test_a_topic_follows_its_resource_through_scale_out_edit_and_delete(k8s_node: Kube, ns: str, namesrv: str) -> None:
    kube = k8s_node
    _apply(kube, ns, "RocketTopic", "orders", {"clusterRef": CLUSTER, "queues": 4, "deletionPolicy": "Delete"})
    ready = _wait_reason(kube, ns, "rmqt", "orders", "Applied")
    assert ready["status"] == "True", ready
    held = _held(namesrv, "topic", "orders")
    assert {b: _queues(c) for b, c in held.items()} == {"rt-0": (4, 4)}, held
    assert held["rt-0"] is not None and held["rt-0"]["attributes"] == {"message.type": "NORMAL"}
    assert held["rt-0"]["perm"] == 6
    print("\n" + kube.run("get", "-n", ns, "rmqt"))

    kube.run("patch", "-n", ns, "rmq", CLUSTER, "--type=merge", "-p", json.dumps({"spec": {"broker": {"groups": 2}}}))
    kube.wait_for(
        "the cluster Ready with 2 groups", lambda: ready_status(kube, ns, CLUSTER, groups=2), timeout=300, interval=1
    )

    def on_both(queues: tuple[int, int]) -> bool:
        found = {b: _queues(c) for b, c in _held(namesrv, "topic", "orders").items()}
        return found == {"rt-0": queues, "rt-1": queues}

    kube.wait_for("the new group has the topic", lambda: on_both((4, 4)), timeout=120, interval=2)
    kube.wait_for(
        "status names both groups",
        lambda: (kube.get("-n", ns, "rmqt", "orders").get("status") or {}).get("brokerNames") == ["rt-0", "rt-1"],
        timeout=120,
        interval=2,
    )

    kube.run("patch", "-n", ns, "rmqt", "orders", "--type=merge", "-p", json.dumps({"spec": {"queues": 6}}))
    kube.wait_for("6 queues on both groups", lambda: on_both((6, 6)), timeout=90, interval=1)
    assert _wait_reason(kube, ns, "rmqt", "orders", "Applied")["status"] == "True"

    kube.run("delete", "-n", ns, "rmqt", "orders", "--wait=true", "--timeout=90s", timeout=120)
    held = _held(namesrv, "topic", "orders")
    assert held == {"rt-0": None, "rt-1": None}, held

    async def routed(admin: Admin) -> bool:
        try:
            await admin.topic_route("orders")
        except RocketError:
            return False
        return True

    assert not _admin(namesrv, routed), "the NameServer still routes the deleted topic"


def test_a_hand_made_topic_is_adopted_not_overwritten_and_retained(k8s_node: Kube, ns: str, namesrv: str) -> None:
    kube = k8s_node
    kube.wait_for("2 groups", lambda: ready_status(kube, ns, CLUSTER, groups=2), timeout=300, interval=1)

    async def create(admin: Admin) -> list[str]:
        return await admin.create_topic("Handmade", cluster=CLUSTER, read_queue_nums=2, write_queue_nums=2)

    assert len(_admin(namesrv, create)) == 2
    _apply(kube, ns, "RocketTopic", "handmade", {"clusterRef": CLUSTER, "topicName": "Handmade"})  # 8 queues
    ready = _wait_reason(kube, ns, "rmqt", "handmade", "Differs")
    assert ready["status"] == "False" and "readQueueNums: has 2, spec says 8" in ready["message"], ready
    status = kube.get("-n", ns, "rmqt", "handmade")["status"]
    assert status["adopted"] is True and status["adoptedGeneration"] == 1
    held = _held(namesrv, "topic", "Handmade")
    assert {b: _queues(c) for b, c in held.items()} == {"rt-0": (2, 2), "rt-1": (2, 2)}, "overwritten"

    kube.run("patch", "-n", ns, "rmqt", "handmade", "--type=merge", "-p", json.dumps({"spec": {"queues": 3}}))
    assert _wait_reason(kube, ns, "rmqt", "handmade", "Applied")["status"] == "True"
    held = _held(namesrv, "topic", "Handmade")
    assert {b: _queues(c) for b, c in held.items()} == {"rt-0": (3, 3), "rt-1": (3, 3)}, held

    kube.run("delete", "-n", ns, "rmqt", "handmade", "--wait=true", "--timeout=30s", timeout=60)  # Retain: at once
    held = _held(namesrv, "topic", "Handmade")
    assert {b: _queues(c) for b, c in held.items()} == {"rt-0": (3, 3), "rt-1": (3, 3)}, "Retain lost the topic"


def test_a_consumer_group_is_applied_and_deleted_per_policy(k8s_node: Kube, ns: str, namesrv: str) -> None:
    kube = k8s_node
    kube.wait_for("2 groups", lambda: ready_status(kube, ns, CLUSTER, groups=2), timeout=300, interval=1)
    policy = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3}}
    spec = {"clusterRef": CLUSTER, "groupName": "GID_billing", "retryMaxTimes": 5, "groupRetryPolicy": policy}
    _apply(kube, ns, "RocketConsumerGroup", "billing", spec | {"deletionPolicy": "Delete"})
    _apply(kube, ns, "RocketConsumerGroup", "keep", {"clusterRef": CLUSTER, "retryMaxTimes": 7})
    for name in ("billing", "keep"):
        assert _wait_reason(kube, ns, "rmqg", name, "Applied")["status"] == "True"
    held = _held(namesrv, "group", "GID_billing")
    assert set(held) == {"rt-0", "rt-1"}
    for config in held.values():
        assert config is not None and config["retryMaxTimes"] == 5, held
        assert config["groupRetryPolicy"] == policy, held
    assert all(c is not None and c["retryMaxTimes"] == 7 for c in _held(namesrv, "group", "keep").values())
    print("\n" + kube.run("get", "-n", ns, "rmqg"))

    kube.run("delete", "-n", ns, "rmqg", "billing", "keep", "--wait=true", "--timeout=90s", timeout=120)
    assert _held(namesrv, "group", "GID_billing") == {"rt-0": None, "rt-1": None}
    kept = _held(namesrv, "group", "keep")
    assert all(c is not None and c["retryMaxTimes"] == 7 for c in kept.values()), kept
