"""spec.failover on kind: the worker holding a group's master is killed (`docker kill`, the node is gone).

Three NameServers run the embedded controller, one per node (the control plane's taint is tolerated and the
anti-affinity is required), so the loss of a worker leaves a majority of controllers. One group, master and
slave on the two workers, SYNC replication with allAckInSyncStateSet. The controller stops hearing the
master's heartbeats and elects the slave on its own, without waiting for Kubernetes to notice the node; a
producer on this host keeps sending through the surviving NameServers and records every acknowledged message.
Once the node is back, the old master's pod returns as a slave, the cluster is Ready, and every acknowledged
message is readable. What writes saw while the node was gone is printed, never asserted (a shared machine).

The operator runs on this host, outside the cluster: the cluster's NetworkPolicies are off here, since they
admit the controller port to the operator's pods only (test_kind_multinode.py covers the policies).
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

NAME = "swift"
TOPIC = "NodeLossOrders"
BROKER_NAME = f"{NAME}-0"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def ns(k8s_kind: Kube) -> Iterator[str]:
    yield from failover_namespace(k8s_kind, "kind-fo")


@pytest.fixture(scope="module")
def operator(k8s_kind: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_kind, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


def test_a_killed_masters_node_elects_its_slave_without_waiting_for_kubernetes(
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
        "failover": {"enabled": True, "controllerStorageSize": "64Mi"},
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
    victim = pods[master]["spec"]["nodeName"]
    alive = [p for p in nameservers.values() if p["spec"]["nodeName"] != victim]
    survivors = ";".join(f"{p['status']['podIP']}:9876" for p in alive)
    with BlockingAdmin(survivors) as admin:
        admin.create_topic(TOPIC, cluster=NAME, read_queue_nums=4, write_queue_nums=4)

    try:
        with Producer(survivors, TOPIC, prefix="n") as producer:
            producer.wait_for(300, timeout=180)
            failed_before, acked_before = len(producer.failures), len(producer.acked)
            killed = time.monotonic()  # `docker kill` of a node returns only once its container is down
            subprocess.run(["/usr/bin/docker", "kill", victim], check=True, capture_output=True)
            print(f"\n`docker kill {victim}` took {time.monotonic() - killed:.1f} s")

            def new_master() -> str | None:
                addr = route_master(survivors, BROKER_NAME)
                return addr if addr is not None and addr != master_addr else None

            new_addr = kube.wait_for("a new master in the routes", new_master, timeout=180, interval=0.2)
            elected = time.monotonic() - killed
            producer.wait_for(len(producer.acked) + 100, timeout=180)  # the new master takes writes
            writing = time.monotonic() - killed
            node_still_ready = node_ready(kube, victim)
            new_pod = next(n for n, p in pods.items() if p["status"].get("podIP") == new_addr.split(":")[0])
            kube.wait_for(
                f"status.masters to name {new_pod}",
                lambda: cluster_status(kube, ns, NAME).get("masters") == new_pod,
                120,
                1,
            )
            outage = {
                "failed": len(producer.failures) - failed_before,
                "acked": len(producer.acked) - acked_before,
                "first failure": producer.failures[failed_before] if len(producer.failures) > failed_before else "-",
            }
            subprocess.run(["/usr/bin/docker", "start", victim], check=True, capture_output=True)

            def back_as_slave() -> bool:
                status = cluster_status(kube, ns, NAME)
                slaves = status.get("groupStatus", [{}])[0].get("slaves", [])
                return status.get("masters") == new_pod and any(s["pod"] == master and s["ready"] for s in slaves)

            kube.wait_for(f"{master} back as a Ready slave of {new_pod}", back_as_slave, timeout=600, interval=2)
            kube.wait_for(
                f"{NAME} Ready after the node's return", lambda: ready_status(kube, ns, NAME), timeout=600, interval=2
            )
            producer.wait_for(len(producer.acked) + 100, timeout=180)
    finally:
        subprocess.run(["/usr/bin/docker", "start", victim], capture_output=True)
    keys = read_back(survivors, TOPIC)
    unreadable = set(producer.acked) - set(keys)
    print(
        f"\nkilled {victim} (master {master}); {new_pod} the new master in the routes {elected:.1f} s later, "
        f"100 more sends acknowledged {writing:.1f} s after the kill (the node still Ready to Kubernetes then: "
        f"{node_still_ready}); meanwhile {outage}; {len(producer.acked)} acknowledged in all, "
        f"{len(unreadable)} unreadable (shared, loaded machine)"
    )
    assert not unreadable, f"{len(unreadable)} acknowledged messages cannot be read: {sorted(unreadable)[:10]}"
