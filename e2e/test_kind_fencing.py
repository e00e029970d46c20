"""spec.failover on kind: the worker holding a group's master goes silent without closing a connection
(`docker pause`: every process on the node freezes, the kubelet too, while the kernel keeps the sockets open).

The same cluster shape as test_kind_failover.py (three NameServers with the embedded controller, one per node;
one group, master and slave on the two workers; SYNC replication with allAckInSyncStateSet), with
failover.nodeLostGraceSeconds 10. The controller stops hearing the master's heartbeats and elects the slave;
Kubernetes marks the node NotReady after its node-monitor grace period; the operator then sees the old master's
pod on a lost node with the mastership elsewhere and force-deletes it (the pod object goes; its StatefulSet makes
a new one, which waits for the node, since the pod's volume lives there). A producer on this host records every
acknowledged message throughout. After `docker unpause` the kubelet finds the old container has no pod any more
and stops it, the new pod starts on the node and joins as a slave, and every acknowledged message is readable.
Timings are printed, never asserted (a shared machine).

The operator runs on this host, outside the cluster, so the cluster's NetworkPolicies are off here (they admit
the controller port to the operator's pods only; test_kind_multinode.py covers them).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from broker.client.blocking import BlockingAdmin
from e2e.kind_failover_harness import (
    cluster_pods,
    cluster_status,
    failover_namespace,
    node_ready,
    route_master,
)
from e2e.node_checks import Producer, read_back
from e2e.operator_harness import OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.kind]

NAME = "fenced"
TOPIC = "PausedNodeOrders"
BROKER_NAME = f"{NAME}-0"
GRACE_SECONDS = 10
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
DOCKER = "/usr/bin/docker"


@pytest.fixture(scope="module")
def ns(k8s_kind: Kube) -> Iterator[str]:
    yield from failover_namespace(k8s_kind, "kind-fence")


@pytest.fixture(scope="module")
def operator(k8s_kind: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_kind, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


def _event_reasons(kube: Kube, ns: str) -> list[str]:
    items = kube.get("-n", ns, "events", "--field-selector", f"involvedObject.name={NAME}")["items"]
    return [str(e.get("reason")) for e in items]


def _docker(*args: str, check: bool = True) -> None:
    subprocess.run([DOCKER, *args], check=check, capture_output=True)


def test_a_silent_masters_node_is_fenced_and_its_pod_returns_as_a_slave(
    k8s_kind: Kube, kind_broker_image: str, ns: str, operator: OperatorProcess
) -> None:
    kube = k8s_kind
    spec = {
        "image": kind_broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 3, "template": {"tolerations": [CONTROL_PLANE_TAINT]}},
        "placement": {"antiAffinity": "required"},
        "broker": {"groups": 1, "slavesPerGroup": 1, "replication": "SYNC"},
        "storage": {"type": "persistentClaim", "size": "128Mi"},
        "failover": {"enabled": True, "controllerStorageSize": "64Mi", "nodeLostGraceSeconds": GRACE_SECONDS},
        "networkPolicy": {"enabled": False},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": NAME}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    try:
        kube.wait_for(f"{NAME} Ready", lambda: ready_status(kube, ns, NAME), timeout=600, interval=2)
    except AssertionError:
        listing = kube.run("get", "pods", "-n", ns, "-o", "wide", check=False)
        raise AssertionError(
            f"not Ready:\n{listing}\n{cluster_status(kube, ns, NAME)}\n{operator.tail(4000)}"
        ) from None
    pods = cluster_pods(kube, ns, NAME)
    nameservers = {n: p for n, p in pods.items() if "-nameserver-" in n}
    assert len({p["spec"]["nodeName"] for p in nameservers.values()}) == 3, "a NameServer per node"
    every_namesrv = ";".join(f"{p['status']['podIP']}:9876" for p in nameservers.values())

    def agreed() -> tuple[str, str] | None:
        """(pod, address) of the master, once status.masters and the routes name the same one."""
        addr, pod = route_master(every_namesrv, BROKER_NAME), cluster_status(kube, ns, NAME).get("masters")
        if addr is None or pod not in pods:
            return None
        return (pod, addr) if pods[pod]["status"].get("podIP") == addr.split(":")[0] else None

    master, master_addr = kube.wait_for("status.masters and the routes agree", agreed, timeout=120, interval=1)
    master_uid = pods[master]["metadata"]["uid"]
    victim = pods[master]["spec"]["nodeName"]
    alive = [p for p in nameservers.values() if p["spec"]["nodeName"] != victim]
    survivors = ";".join(f"{p['status']['podIP']}:9876" for p in alive)
    with BlockingAdmin(survivors) as admin:
        admin.create_topic(TOPIC, cluster=NAME, read_queue_nums=4, write_queue_nums=4)

    try:
        with Producer(survivors, TOPIC, prefix="p") as producer:
            producer.wait_for(300, timeout=180)
            failed_before, acked_before = len(producer.failures), len(producer.acked)
            paused = time.monotonic()
            _docker("pause", victim)

            def new_master() -> str | None:
                addr = route_master(survivors, BROKER_NAME)
                return addr if addr is not None and addr != master_addr else None

            new_addr = kube.wait_for("a new master in the routes", new_master, timeout=180, interval=0.2)
            elected = time.monotonic() - paused
            new_pod = next(n for n, p in pods.items() if p["status"].get("podIP") == new_addr.split(":")[0])
            producer.wait_for(len(producer.acked) + 100, timeout=180)  # the new master takes writes
            writing = time.monotonic() - paused

            kube.wait_for(f"node {victim} NotReady", lambda: not node_ready(kube, victim), timeout=300, interval=1)
            not_ready = time.monotonic() - paused

            def old_pod_gone() -> bool:
                found = cluster_pods(kube, ns, NAME).get(master)
                return found is None or found["metadata"]["uid"] != master_uid

            try:
                kube.wait_for(f"the operator to force-delete {master}", old_pod_gone, timeout=300, interval=1)
            except AssertionError:
                raise AssertionError(f"{master} not force-deleted:\n{operator.tail(4000)}") from None
            fenced = time.monotonic() - paused
            assert "NODE_LOST" in _event_reasons(kube, ns), "no NODE_LOST Event on the RocketCluster"
            kube.wait_for(
                f"status.masters to name {new_pod}",
                lambda: cluster_status(kube, ns, NAME).get("masters") == new_pod,
                120,
                1,
            )
            producer.wait_for(len(producer.acked) + 100, timeout=180)  # writes go on after the fencing
            outage = {
                "failed": len(producer.failures) - failed_before,
                "acked": len(producer.acked) - acked_before,
                "first failure": producer.failures[failed_before] if len(producer.failures) > failed_before else "-",
            }
            _docker("unpause", victim)

            def back_as_slave() -> bool:
                status = cluster_status(kube, ns, NAME)
                slaves = status.get("groupStatus", [{}])[0].get("slaves", [])
                return status.get("masters") == new_pod and any(s["pod"] == master and s["ready"] for s in slaves)

            kube.wait_for(f"{master} back as a Ready slave of {new_pod}", back_as_slave, timeout=600, interval=2)
            assert cluster_pods(kube, ns, NAME)[master]["metadata"]["uid"] != master_uid, "the old pod object came back"
            kube.wait_for(
                f"{NAME} Ready after the node's return", lambda: ready_status(kube, ns, NAME), timeout=600, interval=2
            )
            producer.wait_for(len(producer.acked) + 100, timeout=180)
    finally:
        _docker("unpause", victim, check=False)  # refused when it is not paused: nothing to undo then
    keys = read_back(survivors, TOPIC)
    unreadable = set(producer.acked) - set(keys)
    print(
        f"\npaused {victim} (master {master}); {new_pod} the new master in the routes {elected:.1f} s later, "
        f"100 more sends acknowledged at {writing:.1f} s, the node NotReady at {not_ready:.1f} s, the old pod "
        f"force-deleted at {fenced:.1f} s (grace {GRACE_SECONDS} s); meanwhile {outage}; "
        f"{len(producer.acked)} acknowledged in all, {len(unreadable)} unreadable (shared, loaded machine)"
    )
    assert not unreadable, f"{len(unreadable)} acknowledged messages cannot be read: {sorted(unreadable)[:10]}"
