"""Operations the docs call safe, each checked for lost messages on the node tier.

Every scenario runs a producer that records each acknowledged message, and ends with a read of every
message the topic holds: it prints the count of acknowledged messages and of unreadable ones, which must
be 0. The cluster's status is polled throughout; once Ready is back after the disruption, it must not turn
back. The namespace enforces the `restricted` Pod Security Standard, and the pods run with a read-only root
filesystem.
- A master killed abruptly (SIGKILL of the broker process, then its pod force-deleted) on ephemeral storage,
  with `examples/kubernetes/minimal.yaml` as shipped: the new master pod starts empty and restores its
  slave's messages and topics before it serves.
- The same kill on persistent storage, where the container restarts on its volume.
- Scale-in of a group holding messages of a topic that no consumer group reads: blocked with
  ScaleDownBlocked/UnreadMessages, nothing deleted, until a consumer group has read them.
- spec.storage.size growth on a StorageClass without volume expansion (refused with StorageResizeBlocked,
  and a later config change still rolls) and on one with it (claims and StatefulSet grow, no pod restarts).
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from broker.client import ConsumeFromWhere, ConsumeStatus
from broker.client.blocking import BlockingAdmin, BlockingPushConsumer
from e2e.node_checks import Producer, StatusTimeline, assert_all_read, broker_pid, read_back
from e2e.operator_harness import CRD_FILE, REPO, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

EXAMPLE = REPO / "examples" / "kubernetes" / "minimal.yaml"
MINIMAL = "minimal"  # the example's name
TOPIC = "SafeOrders"
EXPANDABLE_CLASS = "rc-expandable"


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    name = f"safety-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE))
    k8s_node.run("create", "namespace", name)
    # the restricted Pod Security Standard, enforced: every pod of the operator's clusters must meet it
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


def _condition(kube: Kube, ns: str, name: str, type_: str) -> dict[str, Any]:
    status = kube.get("-n", ns, "rmq", name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def _namesrv(kube: Kube, ns: str, name: str) -> str:
    """The NameServer Service's ClusterIP, which kube-proxy routes from the node too."""
    ip = kube.run("get", "-n", ns, "svc", f"{name}-nameserver", "-o", "jsonpath={.spec.clusterIP}").strip()
    return f"{ip}:9876"


def _create(kube: Kube, ns: str, name: str, spec: dict[str, Any]) -> str:
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": name}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    kube.wait_for(f"{name} Ready", lambda: ready_status(kube, ns, name, groups=1), timeout=300, interval=1)
    return _namesrv(kube, ns, name)


def _patch(kube: Kube, ns: str, name: str, spec: dict[str, Any]) -> None:
    kube.run("patch", "-n", ns, "rmq", name, "--type=merge", "-p", json.dumps({"spec": spec}))


def _pod_uids(kube: Kube, ns: str, name: str) -> dict[str, str]:
    pods = kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={name}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def _hold_ready(kube: Kube, ns: str, name: str, timeline: StatusTimeline, groups: int = 1) -> float:
    """Wait for Ready after a disruption, then watch it hold for 20 s; returns when it came back."""
    kube.wait_for(f"{name} Ready again", lambda: ready_status(kube, ns, name, groups=groups), timeout=300, interval=0.5)
    back = time.monotonic()
    time.sleep(20)
    lost = timeline.ready_lost_after(back)
    assert not lost, f"Ready turned back: {lost}; timeline: {timeline.summary()}"
    print(f"status: {timeline.summary()}")
    return back


def test_a_master_killed_on_ephemeral_storage_loses_nothing(k8s_node: Kube, ns: str, operator: OperatorProcess) -> None:
    kube = k8s_node
    kube.run("apply", "-n", ns, "-f", str(EXAMPLE))  # as shipped
    kube.wait_for("the example Ready", lambda: ready_status(kube, ns, MINIMAL, groups=1), timeout=300, interval=1)
    namesrv = _namesrv(kube, ns, MINIMAL)
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(TOPIC, cluster=MINIMAL, read_queue_nums=4, write_queue_nums=4)
    master = f"{MINIMAL}-broker-0-0"
    with StatusTimeline(kube, ns, MINIMAL) as timeline, Producer(namesrv, TOPIC) as producer:
        producer.wait_for(300)
        old_uid = _pod_uids(kube, ns, MINIMAL)[master]
        os.kill(broker_pid(master), signal.SIGKILL)  # a crash: no unregistering, no flush
        kube.run("delete", "pod", "-n", ns, master, "--grace-period=0", "--force", "--wait=false")
        kube.wait_for("a new master pod", lambda: _pod_uids(kube, ns, MINIMAL).get(master, old_uid) != old_uid, 60)
        _hold_ready(kube, ns, MINIMAL, timeline)
        before = len(producer.acked)
        producer.wait_for(before + 100)  # the new master takes writes
    keys = read_back(namesrv, TOPIC)
    assert_all_read("master killed, ephemeral storage", producer, keys)
    with BlockingAdmin(namesrv) as admin:
        route = admin.topic_route(TOPIC)
    assert {q.broker_name for q in route.queue_datas} == {f"{MINIMAL}-0"}, "the new master lacks the topic"
    assert not timeline.ever("Degraded", "True", "ReplicaDiverged"), timeline.summary()
    print(f"sends that failed while the group had no master: {len(producer.failures)}")


def test_scale_in_keeps_a_group_whose_messages_nobody_reads(k8s_node: Kube, ns: str, operator: OperatorProcess) -> None:
    kube = k8s_node
    namesrv = _namesrv(kube, ns, MINIMAL)
    with StatusTimeline(kube, ns, MINIMAL) as timeline:
        kube.run("scale", "-n", ns, f"rmq/{MINIMAL}", "--replicas=2")
        kube.wait_for("two groups Ready", lambda: ready_status(kube, ns, MINIMAL, groups=2), timeout=300, interval=1)
    assert not timeline.ever("Degraded", "True"), f"a planned scale-out was Degraded: {timeline.summary()}"
    topic = "NobodyReads"
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(topic, cluster=MINIMAL, read_queue_nums=4, write_queue_nums=4)
    with Producer(namesrv, topic, prefix="u") as producer:
        producer.wait_for(60)
    kube.run("scale", "-n", ns, f"rmq/{MINIMAL}", "--replicas=1")

    def blocked() -> dict[str, Any] | None:
        found = _condition(kube, ns, MINIMAL, "ScaleDownBlocked")
        return found if found.get("status") == "True" and found.get("reason") == "UnreadMessages" else None

    found = kube.wait_for("ScaleDownBlocked/UnreadMessages", blocked, timeout=180, interval=1)
    assert f"{topic} (" in found["message"], found
    print(f"\nblocked: {found['message']}")
    time.sleep(20)
    group_1 = kube.run("get", "-n", ns, "sts", f"{MINIMAL}-broker-1", "--ignore-not-found", "-o", "name")
    assert group_1.strip(), "the group holding unread messages was deleted"

    consumed: set[str] = set()

    def on_messages(msgs: list[Any]) -> ConsumeStatus:
        consumed.update(m.keys[0] for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        "LateReaders", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(on_messages)
    consumer.start()
    try:
        kube.wait_for("every message consumed", lambda: set(producer.acked) <= consumed, timeout=120)

        def removed() -> bool:
            sts = kube.run("get", "-n", ns, "sts", f"{MINIMAL}-broker-1", "--ignore-not-found", "-o", "name")
            return not sts.strip()

        kube.wait_for("the drained group removed", removed, timeout=240, interval=1)
    finally:
        consumer.shutdown()
    assert_all_read("scale-in of a group holding unread messages", producer, sorted(consumed))
    kube.wait_for("Ready with one group", lambda: ready_status(kube, ns, MINIMAL, groups=1), timeout=120, interval=1)
    kube.run("delete", "rmq", "-n", ns, MINIMAL, "--wait=true", "--timeout=90s", timeout=120)


def _persistent(size: str = "256Mi", **storage: str) -> dict[str, Any]:
    return {
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 1, "replication": "SYNC"},
        "storage": {"type": "persistentClaim", "size": size, **storage},
        "rollout": {"maxSlaveLagBytes": 1048576},
    }


def _claim_template_size(kube: Kube, ns: str, name: str) -> str:
    sts = kube.get("-n", ns, "sts", f"{name}-broker-0")
    return str(sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"])


def _pvc_sizes(kube: Kube, ns: str, name: str) -> set[str]:
    claims = kube.get("-n", ns, "pvc", "-l", f"rocketcluster.io/cluster={name}")["items"]
    return {c["spec"]["resources"]["requests"]["storage"] for c in claims}


def test_a_master_killed_on_persistent_storage_and_a_refused_volume_growth(
    k8s_node: Kube, ns: str, operator: OperatorProcess
) -> None:
    kube = k8s_node
    name = "durable"
    namesrv = _create(kube, ns, name, _persistent())  # the harness's default class: local-path, no expansion
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(TOPIC, cluster=name, read_queue_nums=4, write_queue_nums=4)
    master = f"{name}-broker-0-0"
    with StatusTimeline(kube, ns, name) as timeline, Producer(namesrv, TOPIC) as producer:
        producer.wait_for(300)
        killed = broker_pid(master)
        os.kill(killed, signal.SIGKILL)  # the container restarts on its volume
        kube.wait_for("a new broker process", lambda: broker_pid(master) != killed, timeout=120, interval=1)
        _hold_ready(kube, ns, name, timeline)

        _patch(kube, ns, name, {"storage": {"size": "512Mi"}})

        def refused() -> dict[str, Any] | None:
            found = _condition(kube, ns, name, "StorageResizeBlocked")
            return found if found.get("reason") == "VolumeExpansionNotAllowed" else None

        found = kube.wait_for("StorageResizeBlocked", refused, timeout=60, interval=1)
        print(f"\nrefused: {found['message']}")
        uids = _pod_uids(kube, ns, name)
        roll_started = time.monotonic()
        _patch(kube, ns, name, {"broker": {"config": {"waitTimeMillsInSendQueue": "250"}}})  # restart-only: rolls

        def rolled() -> bool:
            now = _pod_uids(kube, ns, name)
            return all(now.get(pod) not in (None, uid) for pod, uid in uids.items() if "-broker-" in pod)

        kube.wait_for("both broker pods restarted by the roll", rolled, timeout=400, interval=1)
        _hold_ready(kube, ns, name, timeline)
        assert not timeline.ever("Degraded", "True", since=roll_started), f"a planned roll: {timeline.summary()}"
        assert _claim_template_size(kube, ns, name) == "256Mi" and _pvc_sizes(kube, ns, name) == {"256Mi"}
        _patch(kube, ns, name, {"storage": {"size": "256Mi"}})  # set back: no longer blocked
        kube.wait_for(
            "StorageResizeBlocked cleared",
            lambda: _condition(kube, ns, name, "StorageResizeBlocked").get("status") == "False",
            timeout=60,
        )
        before = len(producer.acked)
        producer.wait_for(before + 50)
    assert_all_read("master killed on persistent storage, then a roll", producer, read_back(namesrv, TOPIC))
    kube.run("delete", "rmq", "-n", ns, name, "--wait=true", "--timeout=90s", timeout=120)


def test_volumes_grow_where_the_storage_class_allows_it(k8s_node: Kube, ns: str, operator: OperatorProcess) -> None:
    kube = k8s_node
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": EXPANDABLE_CLASS},
        "provisioner": "rancher.io/local-path",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }
    kube.apply(json.dumps(storage_class))
    name = "growing"
    try:
        namesrv = _create(kube, ns, name, _persistent(storageClassName=EXPANDABLE_CLASS))
        with BlockingAdmin(namesrv) as admin:
            admin.create_topic(TOPIC, cluster=name, read_queue_nums=4, write_queue_nums=4)
        with StatusTimeline(kube, ns, name) as timeline, Producer(namesrv, TOPIC) as producer:
            producer.wait_for(200)
            uids = _pod_uids(kube, ns, name)
            _patch(kube, ns, name, {"storage": {"size": "512Mi"}})

            def grown() -> bool:
                return _claim_template_size(kube, ns, name) == "512Mi" and _pvc_sizes(kube, ns, name) == {"512Mi"}

            kube.wait_for("claims and StatefulSet at 512Mi", grown, timeout=120, interval=1)
            _hold_ready(kube, ns, name, timeline)
            assert _pod_uids(kube, ns, name) == uids, "growing the volumes restarted pods"
            assert not timeline.ever("StorageResizeBlocked", "True"), timeline.summary()
            before = len(producer.acked)
            producer.wait_for(before + 50)
        assert_all_read("volumes grown", producer, read_back(namesrv, TOPIC))
        kube.run("delete", "rmq", "-n", ns, name, "--wait=true", "--timeout=90s", timeout=120)
    finally:
        kube.run("delete", "storageclass", EXPANDABLE_CLASS, "--ignore-not-found", check=False)
