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

import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from e2e.kind_failover_harness import (
    cluster_pods,
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

NAME = "fenced"
TOPIC = "PausedNodeOrders"
GRACE_SECONDS = 10
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
    group = start_failover_group(
        kube, ns, NAME, kind_broker_image, operator, TOPIC, failover={"nodeLostGraceSeconds": GRACE_SECONDS}
    )
    master, victim, survivors = group.master, group.victim, group.survivors
    master_uid = group.pods[master]["metadata"]["uid"]

    try:
        with Producer(survivors, TOPIC, prefix="p") as producer:
            producer.wait_for(300, timeout=180)
            failed_before, acked_before = len(producer.failures), len(producer.acked)
            paused = time.monotonic()
            _docker("pause", victim)

            new_pod = group.wait_new_master(kube)
            elected = time.monotonic() - paused
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
            seen = outage(producer, failed_before, acked_before)
            _docker("unpause", victim)
            kube.wait_for(
                f"{master} back as a Ready slave of {new_pod}",
                lambda: group.old_master_is_slave_of(kube, ns, new_pod),
                timeout=600,
                interval=2,
            )
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
        f"force-deleted at {fenced:.1f} s (grace {GRACE_SECONDS} s); meanwhile {seen}; "
        f"{len(producer.acked)} acknowledged in all, {len(unreadable)} unreadable (shared, loaded machine)"
    )
    assert not unreadable, f"{len(unreadable)} acknowledged messages cannot be read: {sorted(unreadable)[:10]}"
