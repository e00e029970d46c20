"""spec.failover on the node tier: the controller in three NameServers, one group of a master and a slave in
controller mode, SYNC replication with allAckInSyncStateSet.

A producer records every acknowledged message (e2e.node_checks.Producer) and the topic is read back at the end
(every acknowledged message must be readable: the count of unreadable ones is printed and must be 0).
- The master pod force-deleted (`--grace-period=0 --force`): the controller elects the slave, the producer
  keeps going, the deleted pod comes back as a slave. Prints the time from the delete to the new master in the
  routes, and the sends that failed meanwhile.
- A planned roll (a restart-only broker key): the operator hands the mastership over to the in-sync slave before
  it restarts the master, so no acknowledged message is lost and the roll costs one election. Prints the longest
  gap between two acknowledged sends (the write outage) and the elections seen.
- A scale-in (slavesPerGroup 2 -> 1) with the master on the ordinal it removes (made so with electMaster): the
  operator holds the StatefulSet, hands the mastership to a kept in-sync pod, then shrinks it.

Timings are printed, never asserted (the machine is shared and loaded).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from broker.client.blocking import BlockingAdmin
from e2e.node_checks import Producer, StatusTimeline, assert_all_read, read_back, wait_answering
from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.timeout(900)]

NAME = "fo"
TOPIC = "FailoverOrders"
BROKER_NAME = f"{NAME}-0"
SPEC: dict[str, Any] = {
    "imagePullPolicy": "Never",
    "nameServer": {"replicas": 3},
    "broker": {"groups": 1, "slavesPerGroup": 1, "replication": "SYNC"},
    "storage": {"type": "persistentClaim", "size": "256Mi"},
    "failover": {"enabled": True, "controllerStorageSize": "64Mi"},
    "rollout": {"maxSlaveLagBytes": 1048576},
}


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    name = f"failover-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE))
    k8s_node.run("create", "namespace", name)
    k8s_node.run("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    yield name
    k8s_node.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_node.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    k8s_node: Kube, ns: str, broker_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


@pytest.fixture(scope="module")
def cluster(k8s_node: Kube, ns: str, operator: OperatorProcess) -> str:
    """The cluster Ready with the topic; returns the NameServer Service's address."""
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": NAME}}
    k8s_node.apply(json.dumps(body | {"spec": SPEC}), namespace=ns)
    k8s_node.wait_for(f"{NAME} Ready", lambda: ready_status(k8s_node, ns, NAME, groups=1), timeout=420, interval=1)
    ip = k8s_node.run("get", "-n", ns, "svc", f"{NAME}-nameserver", "-o", "jsonpath={.spec.clusterIP}").strip()
    namesrv = f"{ip}:9876"
    wait_answering(k8s_node, namesrv)
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(TOPIC, cluster=NAME, read_queue_nums=4, write_queue_nums=4)
    return namesrv


def _status(kube: Kube, ns: str) -> dict[str, Any]:
    return dict(kube.get("-n", ns, "rmq", NAME).get("status") or {})


def _pods(kube: Kube, ns: str) -> dict[str, dict[str, Any]]:
    items = kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={NAME}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def _route_master(namesrv: str) -> str | None:
    """The address the NameServer lists as the group's master (id 0)."""
    try:
        with BlockingAdmin(namesrv) as admin:
            data = admin.cluster_info().brokers.get(BROKER_NAME)
    except Exception:  # a NameServer that does not answer this instant
        return None
    return None if data is None else data.broker_addrs.get(0)


def _master_pod(kube: Kube, ns: str, namesrv: str) -> tuple[str, str]:
    """(pod, address) of the master the routes name, once status and routes agree."""

    def agreed() -> tuple[str, str] | None:
        addr = _route_master(namesrv)
        masters = _status(kube, ns).get("masters")
        pods = _pods(kube, ns)
        if addr is None or not masters or masters not in pods:
            return None
        return (masters, addr) if pods[masters]["status"].get("podIP") == addr.split(":")[0] else None

    found: tuple[str, str] = kube.wait_for("status.masters and the routes agree", agreed, timeout=120, interval=1)
    return found


class AckGaps:
    """Samples a producer's acknowledged count every 50 ms; the longest time it stood still is the outage."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.longest = 0.0
        self._stop = threading.Event()

    def __enter__(self) -> AckGaps:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        count, since = len(self.producer.acked), time.monotonic()
        while not self._stop.wait(0.05):
            now, seen = time.monotonic(), len(self.producer.acked)
            if seen != count:
                count, since = seen, now
            self.longest = max(self.longest, now - since)


def _elections(kube: Kube, ns: str) -> list[str]:
    events = kube.get("-n", ns, "events", "--field-selector", "reason=MASTER_HANDOVER")["items"]
    return [str(e.get("message")) for e in events]


def test_a_force_deleted_master_is_replaced_by_its_slave_and_returns_as_a_slave(
    k8s_node: Kube, ns: str, cluster: str
) -> None:
    kube, namesrv = k8s_node, cluster
    master, master_addr = _master_pod(kube, ns, namesrv)
    with StatusTimeline(kube, ns, NAME) as timeline, Producer(namesrv, TOPIC, prefix="f") as producer:
        producer.wait_for(300)
        old_uid = _pods(kube, ns)[master]["metadata"]["uid"]
        failures_before = len(producer.failures)
        deleted = time.monotonic()
        kube.run("delete", "pod", "-n", ns, master, "--grace-period=0", "--force", "--wait=false")

        def new_master() -> str | None:
            addr = _route_master(namesrv)
            return addr if addr is not None and addr != master_addr else None

        new_addr = kube.wait_for("a new master in the routes", new_master, timeout=120, interval=0.1)
        elected = time.monotonic() - deleted
        acked_at_election = len(producer.acked)
        producer.wait_for(acked_at_election + 100)  # the new master takes writes
        first_writes = time.monotonic() - deleted

        def returned() -> bool:
            pod = _pods(kube, ns).get(master)
            return pod is not None and pod["metadata"]["uid"] != old_uid

        kube.wait_for("the deleted pod recreated", returned, timeout=120, interval=1)
        kube.wait_for(f"{NAME} Ready again", lambda: ready_status(kube, ns, NAME, groups=1), timeout=300, interval=1)
        now_master, now_addr = _master_pod(kube, ns, namesrv)
        assert now_master != master and now_addr == new_addr, (now_master, now_addr, new_addr)
        group = _status(kube, ns)["groupStatus"][0]
        assert master in [s["pod"] for s in group["slaves"]], group  # it came back as a slave
        producer.wait_for(len(producer.acked) + 100)
    keys = read_back(namesrv, TOPIC)
    assert_all_read("master force-deleted with failover", producer, keys)
    print(
        f"new master {now_master} in the routes {elected:.2f} s after the delete; 100 more sends acknowledged "
        f"{first_writes:.2f} s after it; sends that failed meanwhile: {len(producer.failures) - failures_before} "
        "(shared, loaded machine)"
    )
    print(f"status: {timeline.summary()}")


def test_a_planned_roll_hands_the_mastership_over_before_restarting_the_master(
    k8s_node: Kube, ns: str, cluster: str
) -> None:
    kube, namesrv = k8s_node, cluster
    kube.wait_for(f"{NAME} Ready", lambda: ready_status(kube, ns, NAME, groups=1), timeout=300, interval=1)
    master, _ = _master_pod(kube, ns, namesrv)
    uids = {n: p["metadata"]["uid"] for n, p in _pods(kube, ns).items() if "-broker-" in n}
    handovers_before = len(_elections(kube, ns))
    with Producer(namesrv, TOPIC, prefix="r") as producer:
        producer.wait_for(200)
        failures_before = len(producer.failures)
        with AckGaps(producer) as gaps:
            patch = {"spec": {"broker": {"config": {"waitTimeMillsInSendQueue": "250"}}}}  # restart-only: rolls
            kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps(patch))

            def rolled() -> bool:
                now = {n: p["metadata"]["uid"] for n, p in _pods(kube, ns).items()}
                return all(now.get(pod) not in (None, uid) for pod, uid in uids.items())

            kube.wait_for("every broker pod restarted by the roll", rolled, timeout=600, interval=1)
            kube.wait_for(
                f"{NAME} Ready after the roll", lambda: ready_status(kube, ns, NAME, groups=1), timeout=300, interval=1
            )
            producer.wait_for(len(producer.acked) + 100)
    keys = read_back(namesrv, TOPIC)
    assert_all_read("planned roll with failover", producer, keys)
    handovers = _elections(kube, ns)[handovers_before:]
    new_master, _ = _master_pod(kube, ns, namesrv)
    assert handovers, "the roll restarted the master without handing its mastership over"
    assert new_master != master, "the master before the roll is master again: it was restarted as master"
    print(
        f"roll: longest gap between acknowledged sends {gaps.longest:.2f} s; sends that failed: "
        f"{len(producer.failures) - failures_before}; handovers: {handovers} (shared, loaded machine)"
    )


def _elect(kube: Kube, ns: str, namesrv: str, pod: str) -> None:
    """Make `pod` the master through the controller, as `mqadmin electMaster` does."""
    import asyncio

    from rocketcluster.controller_access import elect_master

    ip = _pods(kube, ns)[pod]["status"]["podIP"]
    with BlockingAdmin(namesrv) as admin:
        addrs = admin.cluster_info().brokers[BROKER_NAME].broker_addrs
    broker_id = next(i for i, addr in addrs.items() if addr.split(":")[0] == ip)
    nameservers = [p for n, p in _pods(kube, ns).items() if "-nameserver-" in n]

    def elected() -> bool:
        try:  # refused until the pod is in the SyncStateSet (caught up)
            asyncio.run(elect_master(nameservers, NAME, BROKER_NAME, broker_id))
        except Exception as exc:
            print(f"electMaster {pod}: {exc}")
            return False
        return True

    kube.wait_for(f"the controller elects {pod}", elected, timeout=120, interval=2)
    kube.wait_for(f"{pod} master in the routes", lambda: (_route_master(namesrv) or "").startswith(ip + ":"), 60)


def test_a_scale_in_moves_the_mastership_off_the_ordinal_it_removes(k8s_node: Kube, ns: str, cluster: str) -> None:
    kube, namesrv = k8s_node, cluster
    kube.run(
        "patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps({"spec": {"broker": {"slavesPerGroup": 2}}})
    )
    kube.wait_for(
        f"{NAME} Ready with two slaves",
        lambda: ready_status(kube, ns, NAME, groups=1) and len(_pods(kube, ns)) == 6,
        420,
        1,
    )
    last = f"{NAME}-broker-0-2"
    kube.wait_for(
        f"{last} in sync",
        lambda: (
            _status(kube, ns)["groupStatus"][0]["slaves"]
            and all(s.get("lagBytes") is not None for s in _status(kube, ns)["groupStatus"][0]["slaves"])
        ),
        120,
        1,
    )
    _elect(kube, ns, namesrv, last)  # the master on the ordinal the scale-in removes
    handovers_before = len(_elections(kube, ns))
    with Producer(namesrv, TOPIC, prefix="s") as producer:
        producer.wait_for(200)
        failures_before = len(producer.failures)
        with AckGaps(producer) as gaps:
            patch = {"spec": {"broker": {"slavesPerGroup": 1}}}
            kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps(patch))
            kube.wait_for(f"{last} removed", lambda: last not in _pods(kube, ns), timeout=300, interval=1)
            kube.wait_for(
                f"{NAME} Ready after the scale-in",
                lambda: ready_status(kube, ns, NAME, groups=1),
                timeout=300,
                interval=1,
            )
            producer.wait_for(len(producer.acked) + 100)
    keys = read_back(namesrv, TOPIC)
    assert_all_read("scale-in off the master's ordinal with failover", producer, keys)
    handovers = _elections(kube, ns)[handovers_before:]
    assert handovers, "the master's pod was removed without handing its mastership over"
    master, _ = _master_pod(kube, ns, namesrv)
    assert master != last
    print(
        f"scale-in: longest gap between acknowledged sends {gaps.longest:.2f} s; sends that failed: "
        f"{len(producer.failures) - failures_before}; handovers: {handovers} (shared, loaded machine)"
    )
