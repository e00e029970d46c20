"""The node-loss glue against a real kube-apiserver (the fixture of test_crd_apiserver; no kubelet, no
controllers run): a pass reads the broker pods' Nodes by name, and a ForceDeletePod removes a pod that a plain
delete leaves Terminating (its node has no kubelet to confirm, which is the lost node's situation), only the
incarnation it names; a refused fencing posts one Warning Event per new message."""

from __future__ import annotations

import json
import time
from typing import Any

import kopf
import pytest

from rocketcluster import names
from rocketcluster.execute import PassContext, execute
from rocketcluster.gather import AdminSession, broker_nodes
from rocketcluster.kube import Kube
from rocketcluster.model import parse_spec
from rocketcluster.observe import BrokerFacts, node_observation
from rocketcluster.plan import Condition, ForceDeletePod, Plan, Progress
from rocketcluster.plan_node_loss import lost_since
from rocketcluster.report import announce_refusal
from tests.operator.test_crd_apiserver import NAMESPACE, Kubectl
from tests.operator.test_crd_apiserver import kubectl as kubectl  # the module-scoped API server fixture

pytestmark = pytest.mark.k8s

CLUSTER = "fence"
SPEC = parse_spec({"broker": {"replication": "SYNC"}, "failover": {"enabled": True}})


def _node(name: str, ready: str, since: str, taint_added: str | None = None) -> dict[str, Any]:
    taints = []
    if taint_added is not None:
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": taint_added})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": taints},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "NodeStatusUnknown" if ready == "Unknown" else "KubeletReady",
                    "lastTransitionTime": since,
                    "lastHeartbeatTime": since,
                }
            ]
        },
    }


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                names.LABEL_CLUSTER: CLUSTER,
                names.LABEL_COMPONENT: names.COMPONENT_BROKER,
                names.LABEL_GROUP: "0",
            },
        },
        "spec": {"nodeName": node, "containers": [{"name": "broker", "image": "broker:none"}]},
    }


def _create(kubectl: Kubectl, obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "Pod":  # no controller manager makes the namespace's default ServiceAccount here
        kubectl.run("create", "serviceaccount", "default")
    created: dict[str, Any] = json.loads(kubectl.ok("create", "-o", "json", "-f", "-", input=json.dumps(obj)))
    return created


def _context(kube: Kube) -> PassContext:
    body = kopf.Body(
        {  # type: ignore[arg-type]
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": {"name": CLUSTER, "namespace": NAMESPACE, "uid": "u-1"},
        }
    )
    return PassContext(
        kube, body, names.ClusterRef(CLUSTER, NAMESPACE, "u-1"), SPEC, BrokerFacts(), AdminSession([]), None
    )


async def test_a_pass_reads_the_broker_pods_nodes_and_sees_which_is_lost(kubectl: Kubectl) -> None:
    _create(kubectl, _node("lost-a", "Unknown", "2026-01-01T00:00:10Z"))
    _create(kubectl, _node("tainted-b", "True", "2025-12-01T00:00:00Z", taint_added="2026-01-01T00:00:05Z"))
    _create(kubectl, _node("fine-c", "True", "2025-12-01T00:00:00Z"))
    pods = [_create(kubectl, _pod(f"{CLUSTER}-broker-0-{i}", n)) for i, n in enumerate(["lost-a", "tainted-b"])]
    pods.append(_create(kubectl, _pod(f"{CLUSTER}-broker-0-2", "fine-c")))
    pods.append(_pod("elsewhere-0", "gone-node"))  # a node that does not exist is left out
    kube = kubectl.api_client()
    try:
        found = await broker_nodes(kube, SPEC, pods)
        assert sorted(n["metadata"]["name"] for n in found) == ["fine-c", "lost-a", "tainted-b"]
        observed = {o.name: lost_since(o, time.time()) for o in map(node_observation, found)}
        assert observed["fine-c"] is None
        assert observed["lost-a"] == 1767225610.0  # 2026-01-01T00:00:10Z
        assert observed["tainted-b"] == 1767225605.0  # the taint, though Ready still says True
        assert await broker_nodes(kube, parse_spec({}), pods) == []  # without failover no Node is read
    finally:
        await kube.close()


async def test_a_force_delete_removes_the_pod_a_plain_delete_leaves_terminating(kubectl: Kubectl) -> None:
    kube = kubectl.api_client()
    try:
        plain = _create(kubectl, _pod(f"{CLUSTER}-broker-0-3", "lost-a"))
        assert await kube.delete("v1", "Pod", NAMESPACE, plain["metadata"]["name"])
        stuck = await kube.get("v1", "Pod", NAMESPACE, plain["metadata"]["name"])
        assert stuck is not None and stuck["metadata"].get("deletionTimestamp")  # no kubelet confirms it

        ctx = _context(kube)
        await execute(ctx, ForceDeletePod(plain["metadata"]["name"], plain["metadata"]["uid"], 0, "lost-a"))
        assert await kube.get("v1", "Pod", NAMESPACE, plain["metadata"]["name"]) is None

        # a pod the StatefulSet recreated under the same name is another incarnation: left alone
        again = _create(kubectl, _pod(f"{CLUSTER}-broker-0-3", "fine-c"))
        await execute(ctx, ForceDeletePod(again["metadata"]["name"], plain["metadata"]["uid"], 0, "lost-a"))
        assert await kube.get("v1", "Pod", NAMESPACE, again["metadata"]["name"]) is not None

        events = json.loads(kubectl.ok("get", "events", "-o", "json"))["items"]
        reasons = [e["reason"] for e in events if e["involvedObject"].get("name") == CLUSTER]
        assert "NODE_LOST" in reasons
    finally:
        await kube.close()


async def test_a_refusal_gets_one_warning_event_per_new_message(kubectl: Kubectl) -> None:
    refusal = Condition("Degraded", "True", "MasterOnLostNode", "broker group 0: its master fence-broker-0-0 ...")
    decided = Plan((), Progress(), (refusal,), 1)
    kube = kubectl.api_client()

    def warnings() -> int:
        events = json.loads(kubectl.ok("get", "events", "-o", "json"))["items"]
        return sum(1 for e in events if e["reason"] == "MasterOnLostNode" and e["type"] == "Warning")

    try:
        body = _context(kube).body
        await announce_refusal(kube, body, {}, decided)
        assert warnings() == 1
        shown = {"conditions": [refusal.to_dict()]}  # the status the pass then wrote: no second Event
        await announce_refusal(kube, body, shown, decided)
        assert warnings() == 1
        other = Condition("Degraded", "True", "PodStuck", "x: CrashLoopBackOff")  # not a refusal: no Event
        await announce_refusal(kube, body, {}, Plan((), Progress(), (other,), 1))
        assert warnings() == 1
    finally:
        await kube.close()
