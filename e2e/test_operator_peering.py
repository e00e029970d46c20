"""Two operator replicas with kopf's peering on the node tier: one reconciles, the other stands by, and when the
active one is killed with SIGKILL in the middle of a roll, the other takes over and the roll completes once.

Both replicas are `rocketcluster-operator --peering=<name>` processes on the node (as the chart runs them, two
pods of one Deployment). The second one starts after the first has written its keep-alive, so it picks a lower
priority and stands by (rocketcluster.peering). A broker.conf change starts a roll of the group's two pods
(slave, then master); once the slave has been restarted, the active replica is killed. Its keep-alive expires
(30 s), the standby resumes kopf's handlers and its own loops, and finishes the roll: every broker pod is
restarted exactly once, the NameServer not at all, and the cluster ends Ready with no roll recorded.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

NAME = "peer"
PEERING = "rc-e2e-peering"
PEERING_CRD = CRD_FILE.parent / "kopfpeerings.kopf.dev.yaml"


@pytest.fixture(scope="module")
def namespace(k8s_node: Kube) -> Iterator[str]:
    name = f"rc-peer-{uuid.uuid4().hex[:6]}"
    for crd, plural in ((CRD_FILE, "rocketclusters.rocketcluster.io"), (PEERING_CRD, "kopfpeerings.kopf.dev")):
        k8s_node.run("apply", "--server-side", "-f", str(crd))
        k8s_node.wait_established(plural)
    k8s_node.run("create", "namespace", name)
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING, "namespace": name}}
    k8s_node.apply(json.dumps(peering))
    yield name
    k8s_node.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=60s", check=False, timeout=90)
    k8s_node.run("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=150)


def _peers(kube: Kube, ns: str) -> dict[str, dict[str, Any]]:
    """The live keep-alives of the peering object: identity -> {priority, lifetime, lastseen}."""
    status = kube.get("-n", ns, "kopfpeering", PEERING).get("status") or {}
    now = datetime.datetime.now(datetime.UTC)
    live = {}
    for identity, info in status.items():
        seen = datetime.datetime.fromisoformat(info["lastseen"])
        seen = seen if seen.tzinfo else seen.replace(tzinfo=datetime.UTC)
        if seen + datetime.timedelta(seconds=int(info["lifetime"])) > now:
            live[identity] = info
    return live


def _identity(kube: Kube, ns: str, proc: OperatorProcess) -> str:
    assert proc.proc is not None
    suffix = f"/{proc.proc.pid}"
    return kube.wait_for(
        f"the keep-alive of operator pid {proc.proc.pid}",
        lambda: next((i for i in _peers(kube, ns) if i.endswith(suffix)), None),
        timeout=60,
    )


def _pods(kube: Kube, ns: str) -> dict[str, tuple[str, bool]]:
    """name -> (uid, ready) of the cluster's pods."""
    out = {}
    for pod in kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={NAME}")["items"]:
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        out[pod["metadata"]["name"]] = (pod["metadata"]["uid"], ready)
    return out


def _status(kube: Kube, ns: str) -> dict[str, Any]:
    return dict(kube.get("-n", ns, "rmq", NAME).get("status") or {})


def _ready(kube: Kube, ns: str) -> bool:
    """Ready, with no roll under way."""
    status = ready_status(kube, ns, NAME)
    return status is not None and not status.get("rollout")


def _handled(log: str) -> int:
    """kopf's log lines of our RocketCluster handler having run."""
    return log.count("Handler 'on_change'")


def test_the_standby_takes_over_mid_roll_and_the_roll_completes_once(
    k8s_node: Kube, broker_image: str, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    kube, ns = k8s_node, namespace
    logs: Path = tmp_path_factory.mktemp("peering")
    first = OperatorProcess(kube.kubeconfig, [ns], logs / "first.log", peering=PEERING)
    second = OperatorProcess(kube.kubeconfig, [ns], logs / "second.log", peering=PEERING)
    try:
        first.start()
        first_id = _identity(kube, ns, first)
        second.start()
        second_id = _identity(kube, ns, second)
        peers = _peers(kube, ns)
        assert peers[second_id]["priority"] < peers[first_id]["priority"], peers

        cluster = {
            "apiVersion": "rocketcluster.io/v1alpha1",
            "kind": "RocketCluster",
            "metadata": {"name": NAME},
            "spec": {
                "image": broker_image,
                "imagePullPolicy": "Never",
                "nameServer": {"replicas": 1},
                "broker": {"groups": 1, "slavesPerGroup": 1, "config": {"autoCreateTopicEnable": "true"}},
                "storage": {"type": "persistentClaim", "size": "256Mi"},
            },
        }
        kube.apply(json.dumps(cluster), namespace=ns)
        try:
            kube.wait_for("Ready=True", lambda: _ready(kube, ns), timeout=300, interval=1)
        except AssertionError:
            raise AssertionError(f"not Ready:\n{_status(kube, ns)}\n{first.tail(3000)}") from None
        assert _handled(first.tail(10**7)) > 0, "the first (active) replica never reconciled"
        assert _handled(second.tail(10**7)) == 0, "the standby ran a handler"

        before = _pods(kube, ns)
        brokers = sorted(p for p in before if "-broker-" in p)
        nameservers = sorted(p for p in before if "-nameserver-" in p)
        assert len(brokers) == 2 and len(nameservers) == 1, before
        incarnations: dict[str, list[str]] = {p: [before[p][0]] for p in before}

        def watch_pods() -> dict[str, tuple[str, bool]]:
            now = _pods(kube, ns)
            for pod, (uid, _) in now.items():
                seen = incarnations.setdefault(pod, [])
                if uid not in seen:
                    seen.append(uid)
            return now

        patch = {"spec": {"broker": {"config": {"autoCreateTopicEnable": "true", "waitTimeMillsInSendQueue": "300"}}}}
        kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps(patch))
        slave = f"{NAME}-broker-0-1"

        def slave_restarted() -> bool:
            watch_pods()
            return len(incarnations[slave]) > 1

        kube.wait_for("the roll to restart the slave", slave_restarted, timeout=300, interval=0.5)
        assert len(incarnations[f"{NAME}-broker-0-0"]) == 1, "the master went before its slave"
        first.kill()
        killed_at = time.monotonic()
        print(f"\nkilled the active replica (pid {first.proc.pid if first.proc else '?'}) after the slave's restart")

        def rolled() -> bool:
            now = watch_pods()
            done = all(len(incarnations[p]) > 1 for p in brokers) and all(now[p][1] for p in now)
            return done and _ready(kube, ns)

        try:
            kube.wait_for("the roll to finish under the second replica", rolled, timeout=600, interval=0.5)
        except AssertionError:
            raise AssertionError(f"{incarnations}\n{_status(kube, ns)}\n{second.tail(4000)}") from None
        print(f"the standby finished the roll {time.monotonic() - killed_at:.0f} s after the kill")
        for _ in range(10):  # a little longer: a second restart of any pod would show here
            watch_pods()
            time.sleep(1)
        assert {p: len(incarnations[p]) for p in brokers} == {p: 2 for p in brokers}, incarnations
        assert {p: len(incarnations[p]) for p in nameservers} == {p: 1 for p in nameservers}, incarnations
        assert _handled(second.tail(10**7)) > 0, "the second replica never took over"
    finally:
        first.kill()
        text = second.finish(kube)
        assert "Traceback" not in text, text[-6000:]
