"""What users do to a running cluster, on the node tier, under a steady producer and consumer.

One RocketCluster (2 NameServers, 2 groups of a master and a slave, SYNC replication, persistent claims) lives
through the module's tests in order: pods in the cluster send and consume 10 000 messages with our client and
with the C++ client, a broker.conf change rolls it (slaves before masters), a no-op edit restarts nothing,
`kubectl scale` adds a third group that takes writes and removes it again after a drain (its volumes kept), a
deleted master comes back on its volume (Degraded, then Ready), so does a broker process killed with SIGKILL,
brokers re-register with NameServers that were all deleted, an image that cannot be pulled is reported and then
fixed, and a drain that cannot finish blocks the scale-in. Meanwhile a producer and a push consumer on the node
run through the cluster's NameServers; every acknowledged message is consumed. Last, the resource is deleted
and created again: its volumes come back with the messages on them.

Two bystander clusters, one in the same namespace and one in another, watched by the same operator, must not
notice any of it: after every step their pods, specs and Ready conditions are what they were.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from broker.client import ConsumeStatus, Message, MessageQueue, SendStatus
from broker.client.blocking import BlockingAdmin, BlockingProducer, BlockingPullConsumer, BlockingPushConsumer
from broker.client.errors import TopicNotExist
from e2e.node_checks import broker_pid
from e2e.operator_harness import CRD_FILE, REPO, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

NAME = "life"
TOPIC = "LifeOrders"
GROUPS = 2
BYSTANDER = "bystander"  # in the same namespace as NAME, and one of that name in a second namespace
CPP_PEER = Path.home() / ".cache/rocketcluster/peers/rocketmq-0.4.4/lib/python3.11/site-packages"


def spec(image: str, groups: int = GROUPS, **config: str) -> dict[str, Any]:
    return {
        "image": image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 2},
        "broker": {"groups": groups, "slavesPerGroup": 1, "replication": "SYNC", "config": config},
        "storage": {"type": "persistentClaim", "size": "256Mi"},
        "rollout": {"maxSlaveLagBytes": 1048576},
        "scaleDown": {"drainTimeoutSeconds": 300},
    }


@dataclass
class Traffic:
    """A producer sending a numbered message every 20 ms and a push consumer, both on the node."""

    namesrv: str
    acked: set[str] = field(default_factory=set)
    consumed: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    sent_to: dict[str, str] = field(default_factory=dict)  # key -> brokerName that acknowledged it
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.consumer = BlockingPushConsumer("LifeConsumers", self.namesrv)
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.register_listener(self._on_messages)
        self.consumer.start()
        self.thread = threading.Thread(target=self._produce, daemon=True)
        self.thread.start()

    def _on_messages(self, msgs: list[Any]) -> ConsumeStatus:
        self.consumed.update(m.keys[0] for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    def _produce(self) -> None:
        with BlockingProducer("LifeProducers", self.namesrv) as producer:
            i = 0
            while not self.stop.is_set():
                key = f"m{i:07d}"
                try:
                    result = producer.send(Message(TOPIC, key.encode(), keys=key))
                except Exception as exc:  # counted, not fatal: sends fail while a master restarts
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                else:  # only SEND_OK acknowledges (not FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, ...)
                    if result.status is SendStatus.SEND_OK:
                        self.acked.add(key)
                        self.sent_to[key] = f"{result.message_queue.broker_name}/q{result.message_queue.queue_id}"
                    else:
                        self.errors.append(f"{key} {result.status.value}")
                i += 1
                time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def _namesrv_addr(kube: Kube, ns: str) -> str:
    """The NameServer Service's ClusterIP: stable across NameServer restarts, and kube-proxy's rules route it
    from the node too (the node cannot resolve the cluster's DNS names)."""
    ip = kube.run("get", "-n", ns, "svc", f"{NAME}-nameserver", "-o", "jsonpath={.spec.clusterIP}").strip()
    return f"{ip}:9876"


def _nameserver_pods(kube: Kube, ns: str) -> dict[str, tuple[str, str | None, bool]]:
    """name -> (uid, pod IP, ready) of the NameServer pods."""
    selector = f"rocketcluster.io/cluster={NAME},app.kubernetes.io/component=nameserver"
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], p["status"].get("podIP"), _pod_is_ready(p))
        for p in kube.get("-n", ns, "pods", "-l", selector)["items"]
    }


def _uids(kube: Kube, ns: str, cluster: str = NAME) -> dict[str, str]:
    pods = kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={cluster}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def _status(kube: Kube, ns: str) -> dict[str, Any]:
    return kube.get("-n", ns, "rmq", NAME).get("status") or {}


def _cluster_pods(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={NAME}")["items"])


def _condition(kube: Kube, ns: str, type_: str) -> str | None:
    found = next((c for c in _status(kube, ns).get("conditions", []) if c["type"] == type_), None)
    return None if found is None else str(found["status"])


def _namespace(kube: Kube, prefix: str) -> Iterator[str]:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.run("apply", "--server-side", "-f", str(CRD_FILE))
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=60s", check=False, timeout=90)
    kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    yield from _namespace(k8s_node, "life")


@pytest.fixture(scope="module")
def other_ns(k8s_node: Kube) -> Iterator[str]:
    yield from _namespace(k8s_node, "life-other")


@pytest.fixture(scope="module")
def operator(
    k8s_node: Kube, ns: str, other_ns: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns, other_ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


@dataclass
class Bystanders:
    """Small clusters the steps must leave alone: what their pods, specs and Ready were when they came up."""

    kube: Kube
    places: list[str]  # the namespaces of the clusters named BYSTANDER
    baseline: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for place in self.places:
            obj = self.kube.get("-n", place, "rmq", BYSTANDER)
            ready = next(
                (c["status"] for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), None
            )
            seen[place] = (obj["metadata"]["generation"], obj["spec"], ready, _uids(self.kube, place, BYSTANDER))
        return seen


@pytest.fixture(scope="module")
def bystanders(k8s_node: Kube, broker_image: str, ns: str, other_ns: str, operator: OperatorProcess) -> Bystanders:
    small = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": BYSTANDER}}
    for place in (ns, other_ns):
        k8s_node.apply(json.dumps(body | {"spec": small}), namespace=place)
    found = Bystanders(k8s_node, [ns, other_ns])

    def all_ready() -> bool:
        return all(ready == "True" for _, _, ready, _ in found.snapshot().values())

    k8s_node.wait_for("the bystander clusters Ready", all_ready, timeout=300, interval=1)
    found.baseline = found.snapshot()
    return found


@pytest.fixture(autouse=True)
def bystanders_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each step: the other clusters' pods were not restarted, their specs not edited, still Ready."""
    found: Bystanders | None = request.getfixturevalue("bystanders") if "traffic" in request.fixturenames else None
    yield
    if found is not None:
        assert found.snapshot() == found.baseline, "a step on one cluster touched another"


@pytest.fixture(scope="module")
def traffic(
    k8s_node: Kube, broker_image: str, ns: str, operator: OperatorProcess, bystanders: Bystanders
) -> Iterator[Traffic]:
    kube = k8s_node
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": NAME}}
    kube.apply(json.dumps(body | {"spec": spec(broker_image)}), namespace=ns)
    kube.wait_for("the cluster Ready", lambda: ready_status(kube, ns, NAME, groups=GROUPS), timeout=300, interval=1)
    namesrv = _namesrv_addr(kube, ns)
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(TOPIC, cluster=NAME, read_queue_nums=4, write_queue_nums=4)
    t = Traffic(namesrv)
    t.start()
    kube.wait_for("the first acknowledged sends", lambda: len(t.acked) > 50, timeout=60)
    yield t
    t.close()


def _round_trip_job(client: str, image: str, topic: str) -> dict[str, Any]:
    """A Job running e2e/pod_roundtrip.py with `client`, finding the NameServers through the connection
    ConfigMap. The C++ client's package comes read-only from the node's peer cache (the harness's node is this
    machine): a test-only hostPath, as no registry here can serve an image with it."""
    container: dict[str, Any] = {
        "name": "roundtrip",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "/scripts/pod_roundtrip.py", "--client", client, "--topic", topic],
        "envFrom": [{"configMapRef": {"name": f"{NAME}-connection"}}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}],
    }
    volumes: list[dict[str, Any]] = [{"name": "scripts", "configMap": {"name": "pod-roundtrip"}}]
    if client == "cpp":
        container["env"].append({"name": "PYTHONPATH", "value": "/peer"})
        container["volumeMounts"].append({"name": "peer", "mountPath": "/peer", "readOnly": True})
        volumes.append({"name": "peer", "hostPath": {"path": str(CPP_PEER), "type": "Directory"}})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"roundtrip-{client}"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container], "volumes": volumes}},
        },
    }


def _finished(kube: Kube, ns: str, client: str) -> dict[str, Any] | None:
    status: dict[str, Any] = kube.get("-n", ns, "job", f"roundtrip-{client}").get("status", {})
    return status if status.get("succeeded") or status.get("failed") else None


def test_pods_send_and_consume_ten_thousand_messages_with_our_client_and_the_cpp_client(
    k8s_node: Kube, broker_image: str, ns: str, traffic: Traffic
) -> None:
    kube = k8s_node
    if not (CPP_PEER / "rocketmq" / "librocketmq.so").exists():  # make test installs it; a bare e2e run may not
        subprocess.run(["bash", str(REPO / "scripts" / "peers.sh")], check=True, timeout=1800)
    script = REPO / "e2e" / "pod_roundtrip.py"
    kube.run("create", "configmap", "-n", ns, "pod-roundtrip", f"--from-file={script}")
    with BlockingAdmin(traffic.namesrv) as admin:
        for client in ("ours", "cpp"):
            admin.create_topic(f"RoundTrip-{client}", cluster=NAME, read_queue_nums=4, write_queue_nums=4)
    started = time.monotonic()
    for client in ("ours", "cpp"):  # one after the other: two at once would only share the node's two cores
        job = _round_trip_job(client, broker_image, f"RoundTrip-{client}")
        kube.apply(json.dumps(job), namespace=ns)
        job_status = kube.wait_for(f"the {client} Job finished", lambda c=client: _finished(kube, ns, c), 400, 2)
        logs = kube.run("logs", "-n", ns, f"job/roundtrip-{client}", check=False)
        assert '"consumed"' in logs, f"{client}: {job_status}\n{logs[-3000:]}"
        result = json.loads(logs.strip().splitlines()[-1])
        assert result["acked"] == result["count"] == 10_000, result
        assert result["consumed"] == result["acked"] and result["consumed_crc"] == result["sent_crc"], result
        print(f"\n{client} client in a pod: 10 000 sent and consumed, CRC sums equal, in {result['seconds']} s")
    print(f"both round trips: {time.monotonic() - started:.0f} s")


def test_a_config_change_rolls_slave_before_master(
    k8s_node: Kube, broker_image: str, ns: str, traffic: Traffic
) -> None:
    kube = k8s_node
    before = _uids(kube, ns)
    changed_at: dict[str, float] = {}
    patch = {"spec": {"broker": {"config": {"waitTimeMillsInSendQueue": "300"}}}}  # a restart-only key
    kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps(patch))
    deadline = time.monotonic() + 600
    brokers = [f"{NAME}-broker-{g}-{i}" for g in range(GROUPS) for i in (1, 0)]
    while len(changed_at) < len(brokers) and time.monotonic() < deadline:
        now = _uids(kube, ns)
        for pod in brokers:
            if pod not in changed_at and now.get(pod) != before[pod]:
                changed_at[pod] = time.monotonic()
        time.sleep(0.5)
    assert set(changed_at) == set(brokers), f"not all restarted: {changed_at}"
    for g in range(GROUPS):
        slave, master = f"{NAME}-broker-{g}-1", f"{NAME}-broker-{g}-0"
        assert changed_at[slave] < changed_at[master], f"group {g}'s master was restarted before its slave"
    nameservers = {p for p in before if "-nameserver-" in p}
    assert {p: _uids(kube, ns)[p] for p in nameservers} == {p: before[p] for p in nameservers}, (
        "a broker key rolled the NameServers"
    )
    kube.wait_for(
        "Ready after the roll",
        lambda: ready_status(kube, ns, NAME, groups=GROUPS) and not _status(kube, ns).get("rollout"),
        300,
    )
    events = kube.run("get", "events", "-n", ns, "--field-selector", "reason=POD_HAS_OLD_REVISION", "-o", "name")
    assert len(events.split()) >= len(brokers), events
    print(f"\nroll: {len(traffic.errors)} send errors, {len(traffic.acked)} acknowledged so far")


def test_a_no_op_edit_restarts_nothing(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    before = _uids(kube, ns)
    kube.run("label", "-n", ns, "rmq", NAME, "team=payments", "--overwrite")
    kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", json.dumps({"spec": {"scaleDown": {"drain": True}}}))
    time.sleep(15)
    assert _uids(kube, ns) == before
    assert not _status(kube, ns).get("rollout")


def test_scale_out_adds_a_group_that_takes_writes(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    kube.run("scale", "-n", ns, f"rmq/{NAME}", f"--replicas={GROUPS + 1}")
    kube.wait_for(
        "three ready groups", lambda: ready_status(kube, ns, NAME, groups=GROUPS + 1), timeout=300, interval=1
    )
    # the new group got the topic (metadata copied) and the producer's route picks it up (30 s route poll)
    # the producer learns the new group at its next route poll (30 s, as RocketMQ's clients); a loaded node
    # has needed more than 90 s between Ready and that poll's first send to it
    new_group = f"{NAME}-{GROUPS}"
    kube.wait_for(
        "writes to the new group", lambda: any(b.startswith(f"{new_group}/") for b in traffic.sent_to.values()), 180
    )
    # what a user sees: our mqadmin's clusterList (#Cluster Name, #Broker Name, #BID, #Addr, ...)
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "mqadmin"), "clusterList", "-n", traffic.namesrv],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    rows = {(cols[1], int(cols[2])) for cols in (line.split() for line in out.splitlines()) if cols[:1] == [NAME]}
    assert rows == {(f"{NAME}-{g}", i) for g in range(GROUPS + 1) for i in (0, 1)}, out
    table = kube.run("get", "-n", ns, "rmq", NAME)
    assert "3/3" in table and "Ready" in table, table  # printer columns: groups, slaves, ready, phase


def test_scale_in_drains_then_removes_the_group_and_keeps_its_volumes(
    k8s_node: Kube, ns: str, traffic: Traffic
) -> None:
    kube = k8s_node
    kube.run("scale", "-n", ns, f"rmq/{NAME}", f"--replicas={GROUPS}")
    seen_draining = False

    def removed() -> bool:
        nonlocal seen_draining
        status = _status(kube, ns)
        groups = {g["index"]: g["state"] for g in status.get("groupStatus", [])}
        seen_draining |= groups.get(GROUPS) == "Draining"
        sts = kube.run("get", "-n", ns, "sts", f"{NAME}-broker-{GROUPS}", "--ignore-not-found", "-o", "name")
        return not sts.strip()

    kube.wait_for(f"group {GROUPS} drained and removed", removed, timeout=360, interval=1)
    assert seen_draining
    pvcs = kube.run("get", "-n", ns, "pvc", "-o", "name").split()
    kept = {f"persistentvolumeclaim/data-{NAME}-broker-{GROUPS}-{i}" for i in (0, 1)}
    assert kept <= set(pvcs), pvcs
    kube.wait_for("Ready with two groups", lambda: ready_status(kube, ns, NAME, groups=GROUPS), timeout=120)


def test_a_deleted_master_comes_back_on_its_volume(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    master = f"{NAME}-broker-0-0"
    pvc_uid = kube.get("-n", ns, "pvc", f"data-{master}")["metadata"]["uid"]
    consumed_before = len(traffic.consumed)
    kube.run("delete", "pod", "-n", ns, master, "--wait=false")
    # The master unregisters as it stops; until its new pod registers, group 0 is its slave alone. A reader
    # that starts then (fresh group, from offset 0) must get group 0's messages: from the slave.
    with BlockingAdmin(traffic.namesrv) as admin:

        def slave_alone() -> bool:
            rows = {(r.broker_name, r.broker_id) for r in admin.cluster_list() if r.cluster == NAME}
            return (f"{NAME}-0", 1) in rows and (f"{NAME}-0", 0) not in rows

        kube.wait_for("group 0 served by its slave alone", slave_alone, timeout=60, interval=0.1)
    reader = BlockingPullConsumer(f"LifeSlaveReaders-{uuid.uuid4().hex[:6]}", traffic.namesrv)
    queues = [q for q in reader.fetch_queues(TOPIC) if q.broker_name == f"{NAME}-0"]
    reader.assign(queues)
    reader.start()
    for q in queues:
        reader.seek_to_begin(q)  # the queue's first offset, asked of the slave
    from_slave = reader.poll(10)
    reader.shutdown()
    assert from_slave, "nothing read from group 0 while its master was away"
    seen = set()

    def back() -> bool:
        seen.add(_condition(kube, ns, "Degraded"))
        return "True" in seen and ready_status(kube, ns, NAME, groups=GROUPS)

    kube.wait_for("Degraded, then Ready", back, timeout=300, interval=0.5)
    assert kube.get("-n", ns, "pvc", f"data-{master}")["metadata"]["uid"] == pvc_uid
    assert len(traffic.consumed) > consumed_before, "the push consumer stopped while the master was away"
    print(f"\nmaster away: {len(from_slave)} messages of group 0 read from its slave")


def _restarts(kube: Kube, ns: str, pod: str) -> int:
    statuses = kube.get("-n", ns, "pod", pod).get("status", {}).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount", 0))


def test_a_broker_killed_with_sigkill_recovers_in_its_pod(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    master = f"{NAME}-broker-0-0"
    restarts = _restarts(kube, ns, master)
    os.kill(broker_pid(master), signal.SIGKILL)  # a crash: no graceful stop, no flush
    kube.wait_for("the container restarted", lambda: _restarts(kube, ns, master) > restarts, timeout=120)
    kube.wait_for("Ready again", lambda: ready_status(kube, ns, NAME, groups=GROUPS), timeout=300, interval=1)


def test_brokers_register_again_with_new_nameservers(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    brokers = {k: v for k, v in _uids(kube, ns).items() if "-broker-" in k}
    old = {uid for uid, _, _ in _nameserver_pods(kube, ns).values()}
    kube.run(
        "delete",
        "pod",
        "-n",
        ns,
        "-l",
        f"rocketcluster.io/cluster={NAME},app.kubernetes.io/component=nameserver",
        "--wait=false",
    )
    started = time.monotonic()

    def new_nameservers() -> list[str]:
        pods = _nameserver_pods(kube, ns).values()
        fresh = [ip for uid, ip, ready in pods if uid not in old and ready and ip]
        return fresh if len(fresh) == 2 else []

    addrs = kube.wait_for("two new NameServer pods", new_nameservers, timeout=120, interval=0.5)
    expected = {(f"{NAME}-{g}", i) for g in range(GROUPS) for i in (0, 1)}

    def registered_with_each() -> bool:
        for ip in addrs:  # each NameServer on its own: the Service would pick one at random
            with BlockingAdmin(f"{ip}:9876") as admin:
                if {(r.broker_name, r.broker_id) for r in admin.cluster_list() if r.cluster == NAME} != expected:
                    return False
        return True

    kube.wait_for("both brokers registered with each new NameServer", registered_with_each, timeout=60, interval=1)
    print(f"\nNameServers deleted -> brokers registered with both new ones: {time.monotonic() - started:.1f} s")
    assert {k: v for k, v in _uids(kube, ns).items() if "-broker-" in k} == brokers, "a broker was restarted"
    before = len(traffic.acked)
    kube.wait_for("clients sending again", lambda: len(traffic.acked) > before + 50, timeout=60)


def test_an_image_that_cannot_be_pulled_is_reported_then_fixed(
    k8s_node: Kube, broker_image: str, ns: str, traffic: Traffic
) -> None:
    kube = k8s_node
    bad = json.dumps({"spec": {"image": "rocketcluster.local/broker:no-such-tag"}})
    kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", bad)

    def degraded() -> str | None:
        found = next((c for c in _status(kube, ns).get("conditions", []) if c["type"] == "Degraded"), None)
        return found["message"] if found and found["status"] == "True" and "Err" in found["message"] else None

    message = kube.wait_for("Degraded naming the pod's reason", degraded, timeout=180, interval=1)
    assert "ErrImageNeverPull" in message or "ImagePull" in message, message
    time.sleep(10)
    down = [p for p in _cluster_pods(kube, ns) if not _pod_is_ready(p)]
    assert len(down) == 1, f"the roll took a second pod down: {[p['metadata']['name'] for p in down]}"
    assert _status(kube, ns).get("rollout"), "a half-rolled cluster must say so in status"
    good = json.dumps({"spec": {"image": broker_image}})
    kube.run("patch", "-n", ns, "rmq", NAME, "--type=merge", "-p", good)
    kube.wait_for(
        "Ready with the good image", lambda: ready_status(kube, ns, NAME, groups=GROUPS), timeout=300, interval=1
    )


def _pod_is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def test_a_drain_that_cannot_finish_blocks_the_scale_in(k8s_node: Kube, ns: str, traffic: Traffic) -> None:
    kube = k8s_node
    kube.run("scale", "-n", ns, f"rmq/{NAME}", f"--replicas={GROUPS + 1}")
    kube.wait_for(
        "three ready groups", lambda: ready_status(kube, ns, NAME, groups=GROUPS + 1), timeout=300, interval=1
    )
    # a consumer group that read a little of the new group's queue and stopped: its lag there never reaches 0
    new_group = f"{NAME}-{GROUPS}"
    with BlockingAdmin(traffic.namesrv) as admin:

        def created_on_the_new_group() -> bool:
            # Ready needs the new master registered with one NameServer, and the admin may ask another: create
            # the topic (idempotent) on every master the asked NameServer knows until the new group is one of them
            admin.create_topic("LifeIdle", cluster=NAME, read_queue_nums=1, write_queue_nums=1)
            try:
                return admin.topic_route("LifeIdle").broker(new_group) is not None
            except TopicNotExist:  # the brokers' registrations naming it have not reached this NameServer yet
                return False

        kube.wait_for("LifeIdle created on the new group", created_on_the_new_group, timeout=90, interval=3)
    with BlockingProducer("IdleProducers", traffic.namesrv) as producer:

        def new_group_queue() -> MessageQueue | None:
            return next((q for q in producer.fetch_publish_queues("LifeIdle") if q.broker_name == new_group), None)

        queue = kube.wait_for("LifeIdle routed to the new group", new_group_queue, timeout=90)
        for i in range(20):
            producer.send(Message("LifeIdle", f"idle {i}".encode()), queue=queue)
    idle = BlockingPullConsumer("LifeIdleReaders", traffic.namesrv)
    idle.assign([queue])
    idle.start()
    idle.seek_to_begin(queue)
    read: list[Any] = []
    deadline = time.monotonic() + 60
    while len(read) < 5 and time.monotonic() < deadline:
        read += idle.poll(2)
    idle.commit()
    idle.shutdown()
    assert read, "the idle group read nothing of the new group's queue"
    with BlockingProducer("IdleProducers", traffic.namesrv) as producer:  # what it will never read
        for i in range(40):
            producer.send(Message("LifeIdle", f"unread {i}".encode()), queue=queue)
    with BlockingAdmin(traffic.namesrv) as admin:
        idle_lag = admin.consumer_lag(new_group).per_group.get("LifeIdleReaders", 0)
    assert idle_lag >= 40, f"the drain would not be blocked: the idle group's lag on {new_group} is {idle_lag}"
    kube.run(
        "patch",
        "-n",
        ns,
        "rmq",
        NAME,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"scaleDown": {"drainTimeoutSeconds": 20}}}),
    )
    kube.run("scale", "-n", ns, f"rmq/{NAME}", f"--replicas={GROUPS}")

    def blocked() -> bool:
        found = next((c for c in _status(kube, ns).get("conditions", []) if c["type"] == "ScaleDownBlocked"), None)
        return bool(found and found["status"] == "True" and found["reason"] == "DrainTimedOut")

    kube.wait_for("ScaleDownBlocked", blocked, timeout=240, interval=1)
    assert kube.run("get", "-n", ns, "sts", f"{NAME}-broker-{GROUPS}", "-o", "name").strip(), (
        "a blocked drain removed the group"
    )
    # scaling back up cancels the drain: the group takes writes again
    kube.run("scale", "-n", ns, f"rmq/{NAME}", f"--replicas={GROUPS + 1}")
    kube.wait_for(
        "three ready groups again", lambda: ready_status(kube, ns, NAME, groups=GROUPS + 1), timeout=120, interval=1
    )
    kube.wait_for("not blocked", lambda: not blocked(), timeout=60)


def test_no_acknowledged_message_is_lost(k8s_node: Kube, traffic: Traffic) -> None:
    traffic.close()
    acked = set(traffic.acked)
    k8s_node.wait_for("every acknowledged message consumed", lambda: acked <= traffic.consumed, timeout=180, interval=1)
    print(f"\nacknowledged {len(acked)}, consumed {len(traffic.consumed)}, send errors {len(traffic.errors)}")
    traffic.consumer.shutdown()


def test_deleting_and_recreating_the_resource_reattaches_the_data(
    k8s_node: Kube, broker_image: str, ns: str, traffic: Traffic
) -> None:
    kube = k8s_node
    sample = sorted(traffic.acked)[-20:]
    kube.run("delete", "-n", ns, "rmq", NAME, "--wait=true", "--timeout=120s", timeout=150)
    mine = f"rocketcluster.io/cluster={NAME}"
    kube.wait_for(
        "children collected", lambda: not kube.run("get", "-n", ns, "sts", "-l", mine, "-o", "name").strip(), 180
    )
    claims = kube.run("get", "-n", ns, "pvc", "-l", mine, "-o", "name").split()
    assert len(claims) == 2 * (GROUPS + 1), f"whenDeleted: Retain keeps the claims: {claims}"
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": NAME}}
    kube.apply(json.dumps(body | {"spec": spec(broker_image, groups=GROUPS + 1)}), namespace=ns)
    kube.wait_for("Ready again", lambda: ready_status(kube, ns, NAME, groups=GROUPS + 1), timeout=300, interval=1)
    found: set[str] = set()
    with BlockingAdmin(_namesrv_addr(kube, ns)) as admin:
        for key in sample:
            found.update(m.keys[0] for m in admin.query_message_by_key(TOPIC, key) if m.keys)
    assert set(sample) <= found, f"not found after re-creation: {sorted(set(sample) - found)}"
