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

import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from e2e.kind_failover_harness import (
    cluster_status,
    failover_namespace,
    node_ready,
    outage,
    start_failover_group,
)
from e2e.node_checks import Producer, read_back
from e2e.operator_harness import OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.kind]

NAME = "swift"
TOPIC = "NodeLossOrders"


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
    group = start_failover_group(kube, ns, NAME, kind_broker_image, operator, TOPIC)
    master, victim, survivors = group.master, group.victim, group.survivors

    try:
        with Producer(survivors, TOPIC, prefix="n") as producer:
            producer.wait_for(300, timeout=180)
            failed_before, acked_before = len(producer.failures), len(producer.acked)
            killed = time.monotonic()  # `docker kill` of a node returns only once its container is down
            subprocess.run(["/usr/bin/docker", "kill", victim], check=True, capture_output=True)
            print(f"\n`docker kill {victim}` took {time.monotonic() - killed:.1f} s")

            new_pod = group.wait_new_master(kube)
            elected = time.monotonic() - killed
            producer.wait_for(len(producer.acked) + 100, timeout=180)  # the new master takes writes
            writing = time.monotonic() - killed
            node_still_ready = node_ready(kube, victim)
            kube.wait_for(
                f"status.masters to name {new_pod}",
                lambda: cluster_status(kube, ns, NAME).get("masters") == new_pod,
                120,
                1,
            )
            seen = outage(producer, failed_before, acked_before)
            subprocess.run(["/usr/bin/docker", "start", victim], check=True, capture_output=True)
            kube.wait_for(
                f"{master} back as a Ready slave of {new_pod}",
                lambda: group.old_master_is_slave_of(kube, ns, new_pod),
                timeout=600,
                interval=2,
            )
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
        f"{node_still_ready}); meanwhile {seen}; {len(producer.acked)} acknowledged in all, "
        f"{len(unreadable)} unreadable (shared, loaded machine)"
    )
    assert not unreadable, f"{len(unreadable)} acknowledged messages cannot be read: {sorted(unreadable)[:10]}"
