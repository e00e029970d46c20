"""The operator on a multi-node kind cluster (1 control plane + 2 workers, e2e/kind/).

- Placement: a RocketCluster of 2 groups x (master + slave), with the operator's default anti-affinity, runs
  every group's master and slave on different nodes.
- Drain: `kubectl drain` of the worker that holds the masters, under a steady stream of sends. The
  evictions go through the groups' PodDisruptionBudgets, so every group keeps a Ready pod throughout; once
  the node is uncordoned the cluster is Ready again, and every acknowledged message is consumed.
- Node loss: the worker container holding a master is killed (`docker kill`) and started again. Meanwhile the
  test records what reads and writes saw; once the node is back the cluster is Ready and every acknowledged
  message is consumed.
- Node loss, reads: while that node is gone, a consumer group started then reads every message the lost
  master had acknowledged, from the group's slave.
- NetworkPolicy: a policy that denies all egress in a namespace stops a client pod there from reaching a
  server pod that a client in another namespace reaches, on kind's network (kube-router's policy
  controller, iptables and ipset).
- The operator's generated NetworkPolicies: a pod of the cluster's namespace reaches the NameServer (9876)
  and a broker (10911); a pod of another namespace cannot connect to either.

The operator runs as a host process against the kind API server; cluster.sh routes each node's pod CIDR
via the node, so it reaches pod IPs as on the host-process harness. The cluster's generated NetworkPolicies
are enforced here, so its spec admits this host's address (an ``ipBlock``) beside its own namespace.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from broker.client import ConsumeStatus, Message, SendStatus
from broker.client.blocking import BlockingAdmin, BlockingProducer, BlockingPushConsumer
from broker.client.errors import TopicNotExist
from broker.client.message import ConsumeFromWhere
from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.kind]


def _new_namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", name)
    return name


@pytest.fixture(scope="module")
def namespace(k8s_kind: Kube) -> Iterator[str]:
    k8s_kind.run("apply", "--server-side", "-f", str(CRD_FILE))
    k8s_kind.wait_established("rocketclusters.rocketcluster.io")
    name = _new_namespace(k8s_kind, "rc-kind")
    yield name
    k8s_kind.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_kind.run("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=150)


@pytest.fixture(scope="module")
def operator(k8s_kind: Kube, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_kind, [namespace], tmp_path_factory.mktemp("op")) as proc:
        yield proc


def test_cluster_has_three_ready_nodes(k8s_kind: Kube) -> None:
    nodes = k8s_kind.get("nodes")["items"]
    ready = [
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    ]
    assert len(nodes) == 3 and len(ready) == 3, [n["metadata"]["name"] for n in nodes]
    workers = [n for n in nodes if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]]
    assert len(workers) == 2


def test_each_group_runs_master_and_slave_on_different_nodes(
    k8s_kind: Kube, kind_broker_image: str, namespace: str, operator: OperatorProcess
) -> None:
    kube, ns = k8s_kind, namespace
    cluster = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketCluster",
        "metadata": {"name": "spread"},
        "spec": {
            "image": kind_broker_image,
            "imagePullPolicy": "Never",
            # two NameServers: the drain test below moves one while clients keep the other
            "nameServer": {"replicas": 2},
            "storage": {"type": "persistentClaim", "size": "128Mi"},
            # the NameServers drop a lost broker after 20 s (RocketMQ's default is 120 s), so that clients
            # turn to its slave while the node-loss test below has the node gone
            "broker": {"groups": 2, "slavesPerGroup": 1, "config": {"channelExpiredTimeout": "20000"}},
            # the pods of this namespace, and this host: the operator and the tests' clients run here
            **kube.policy_admitting_this_host(),
        },
    }
    kube.apply(json.dumps(cluster), namespace=ns)
    try:
        status = kube.wait_for("Ready=True", lambda: ready_status(kube, ns, "spread"), timeout=420, interval=2)
    except AssertionError:
        listing = kube.run("get", "pods", "-n", ns, "-o", "wide", check=False)
        status = json.dumps(kube.get("-n", ns, "rmq", "spread").get("status"), indent=1)
        raise AssertionError(f"not Ready:\n{listing}\n{status}\n{operator.tail(4000)}") from None
    groups = status["groupStatus"]
    assert len(groups) == 2, groups

    pods = {p["metadata"]["name"]: p for p in kube.get("-n", ns, "pods")["items"]}
    placed: dict[str, list[str]] = {}
    for g in groups:
        members = [g["master"], *g["slaves"]]
        nodes = []
        for m in members:
            pod = pods[m["pod"]]
            assert m["ready"], g
            nodes.append(pod["spec"]["nodeName"])
        placed[g["brokerName"]] = nodes
    for group, nodes in placed.items():
        assert len(set(nodes)) == len(nodes), f"group {group}: master and slave share a node: {placed}"
    print(f"\nplacement: {placed}")


def test_generated_network_policies_admit_the_namespace_and_block_another(
    k8s_kind: Kube, kind_broker_image: str, namespace: str, operator: OperatorProcess
) -> None:
    kube, ns = k8s_kind, namespace
    _require_policy_engine(kube)
    status = kube.wait_for("Ready=True", lambda: ready_status(kube, ns, "spread"), timeout=300, interval=2)
    policies = {p["metadata"]["name"] for p in kube.get("-n", ns, "networkpolicy")["items"]}
    assert {"spread-nameserver", "spread-broker"} <= policies, policies
    pods = {p["metadata"]["name"]: p for p in kube.get("-n", ns, "pods")["items"]}
    nameserver = next(p["status"]["podIP"] for n, p in pods.items() if "nameserver" in n)
    broker = pods[status["groupStatus"][0]["master"]["pod"]]["status"]["podIP"]
    targets = (f"{nameserver}:9876", f"{broker}:10911")
    outside = _new_namespace(kube, "np-outside")
    try:
        results = _probe_results(
            kube,
            {
                "inside": _probe_pod("np-inside", ns, kind_broker_image, *targets),
                "outside": _probe_pod("np-outside", outside, kind_broker_image, *targets),
            },
        )
        inside, out = results["inside"], results["outside"]
        assert inside[0] == "Succeeded" and inside[1].count(" connected (") == 2, results
        assert out[0] == "Failed" and out[1].count(" refused: ") == 2, results
        print(f"\nfrom {ns}: {inside[1]!r}; from {outside}: {out[1]!r}")
    finally:
        kube.run("delete", "pod", "-n", ns, "np-inside", "--wait=false", check=False)
        kube.run("delete", "namespace", outside, "--wait=false", check=False)


DRAIN_TOPIC = "DrainOrders"


class _Traffic:
    """Sends a numbered message every 20 ms from this host (pod IPs are routed to the nodes) and consumes them."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self.acked: set[str] = set()
        self.acked_on: dict[str, str] = {}  # key -> the group (broker name) that acknowledged it
        self.consumed: set[str] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.consumer = BlockingPushConsumer("DrainConsumers", namesrv)
        self.consumer.subscribe(DRAIN_TOPIC, "*")
        self.consumer.register_listener(self._on_messages)
        self.thread = threading.Thread(target=self._produce, daemon=True)

    def start(self) -> None:
        self.consumer.start()
        self.thread.start()

    def _on_messages(self, msgs: list[Any]) -> ConsumeStatus:
        self.consumed.update(m.keys[0] for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    def _produce(self) -> None:
        with BlockingProducer("DrainProducers", self.namesrv) as producer:
            i = 0
            while not self.stop.is_set():
                key = f"d{i:07d}"
                try:
                    result = producer.send(Message(DRAIN_TOPIC, key.encode(), keys=key))
                except Exception as exc:  # counted: sends fail while a group has no master
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                else:  # only SEND_OK acknowledges: FLUSH_SLAVE_TIMEOUT says the replicas may not hold it
                    if result.status is SendStatus.SEND_OK:
                        self.acked_on[key] = result.message_queue.broker_name
                        self.acked.add(key)
                    else:
                        self.errors.append(f"{key} {result.status.value}")
                i += 1
                time.sleep(0.02)

    def stop_sending(self) -> None:
        self.stop.set()
        self.thread.join(30)

    def drain(self, seconds: float) -> set[str]:
        """Waits up to `seconds` for the consumer to get every acknowledged message; returns those it did not."""
        deadline = time.monotonic() + seconds
        while (missing := self.acked - self.consumed) and time.monotonic() < deadline:
            time.sleep(1)
        return missing

    def close(self) -> None:
        self.stop_sending()
        self.consumer.shutdown()


def _route_views(kube: Kube, ns: str) -> str:
    """What went wrong, for a failure message: the pods, each NameServer's route of the topic, and each broker's
    registration state (which NameServers hold its latest registration, which refused or failed it)."""
    ips = {p["metadata"]["name"]: ip for p in kube.get("-n", ns, "pods")["items"] if (ip := p["status"].get("podIP"))}
    nameservers = {name: ip for name, ip in ips.items() if "nameserver" in name}
    lines = [kube.run("get", "pods", "-n", ns, "-o", "wide", check=False)]
    for name, ip in ips.items():
        try:
            if name in nameservers:  # one NameServer's own view: an admin that knows only it
                with BlockingAdmin(f"{ip}:9876") as admin:
                    route = admin.topic_route(DRAIN_TOPIC)
                view = str({b.broker_name: b.broker_addrs for b in route.broker_datas})
            else:
                with BlockingAdmin(";".join(f"{a}:9876" for a in nameservers.values())) as admin:
                    info = admin.runtime_info(f"{ip}:10911")
                keys = ("registeredNameServers", "registerFailedNameServers", "lastRegisterTimestamp")
                view = str({k: info.get(k) for k in keys})
        except Exception as exc:  # the failure is what this reports
            view = f"{type(exc).__name__}: {exc}"
        lines.append(f"{name} ({ip}): {view}")
    return "\n".join(lines)


def _ready_per_group(kube: Kube, ns: str, groups: list[dict[str, Any]]) -> dict[str, int]:
    pods = {p["metadata"]["name"]: p for p in kube.get("-n", ns, "pods")["items"]}

    def ready(name: str) -> bool:
        conds = pods.get(name, {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    return {g["brokerName"]: sum(ready(m["pod"]) for m in [g["master"], *g["slaves"]]) for g in groups}


def test_draining_a_worker_keeps_a_ready_pod_per_group_and_loses_no_acknowledged_message(
    k8s_kind: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube, ns = k8s_kind, namespace
    status = kube.wait_for("Ready=True", lambda: ready_status(kube, ns, "spread"), timeout=300, interval=2)
    groups = status["groupStatus"]
    pods = {p["metadata"]["name"]: p for p in kube.get("-n", ns, "pods")["items"]}
    masters_on: dict[str, int] = {}
    for g in groups:
        node = pods[g["master"]["pod"]]["spec"]["nodeName"]
        masters_on[node] = masters_on.get(node, 0) + 1
    victim = max(masters_on, key=lambda n: masters_on[n])
    namesrv = ";".join(
        f"{p['status']['podIP']}:9876" for n, p in pods.items() if "nameserver" in n and p["status"].get("podIP")
    )
    with BlockingAdmin(namesrv) as admin:
        admin.create_topic(DRAIN_TOPIC, cluster="spread", read_queue_nums=4, write_queue_nums=4)
    traffic = _Traffic(namesrv)
    traffic.start()
    try:
        kube.wait_for("the first acknowledged sends", lambda: len(traffic.acked) > 50, timeout=90)
        lowest = {name: 2 for name in (g["brokerName"] for g in groups)}
        watching = threading.Event()

        def watch() -> None:  # the fewest Ready pods each group had at any moment of the drain
            while not watching.is_set():
                try:
                    for name, n in _ready_per_group(kube, ns, groups).items():
                        lowest[name] = min(lowest[name], n)
                except AssertionError:
                    pass
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        out = kube.run("drain", victim, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s", timeout=330)
        drained_in = time.monotonic() - started
        watching.set()
        watcher.join(10)
        assert "evicted" in out, out
        assert all(n >= 1 for n in lowest.values()), f"a group lost every Ready pod during the drain: {lowest}"
        kube.run("uncordon", victim)
        kube.wait_for("Ready=True after uncordon", lambda: ready_status(kube, ns, "spread"), timeout=420, interval=2)
        acked_before = len(traffic.acked)
        kube.wait_for("sends acknowledged again", lambda: len(traffic.acked) > acked_before + 50, timeout=120)
        traffic.stop_sending()
        missing = traffic.drain(180)
        views = _route_views(kube, ns) if missing else ""
    finally:
        kube.run("uncordon", victim, check=False)
        traffic.close()
    print(
        f"\ndrained {victim} in {drained_in:.0f} s; fewest Ready pods per group during the drain: {lowest}; "
        f"{len(traffic.acked)} sends acknowledged, {len(traffic.errors)} failed"
        f" (first: {traffic.errors[0] if traffic.errors else '-'})"
    )
    assert not missing, f"{len(missing)} acknowledged messages never consumed, e.g. {sorted(missing)[:5]}\n{views}"


def _node_ready(kube: Kube, node: str) -> bool:
    conds = kube.get("node", node)["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def test_a_killed_worker_comes_back_and_no_acknowledged_message_is_lost(
    k8s_kind: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube, ns = k8s_kind, namespace
    status = kube.wait_for("Ready=True", lambda: ready_status(kube, ns, "spread"), timeout=420, interval=2)
    groups = status["groupStatus"]
    pods = {p["metadata"]["name"]: p for p in kube.get("-n", ns, "pods")["items"]}
    victim = pods[groups[0]["master"]["pod"]]["spec"]["nodeName"]
    # the groups whose master dies with the node; their slaves are elsewhere (placement test)
    orphaned = {g["brokerName"] for g in groups if pods[g["master"]["pod"]]["spec"]["nodeName"] == victim}
    namesrv = ";".join(
        f"{p['status']['podIP']}:9876"
        for n, p in pods.items()
        if "nameserver" in n and p["status"].get("podIP") and p["spec"]["nodeName"] != victim
    )
    traffic = _Traffic(namesrv)
    traffic.start()
    slave_reads: set[str] = set()
    try:
        # A NameServer the drain test moved knows a group only once its brokers register again (every 30 s),
        # so the sends may reach the groups one after the other: wait until the doomed masters hold some.
        kube.wait_for(
            f"sends acknowledged by {sorted(orphaned)}",
            lambda: len(traffic.acked) > 50 and orphaned <= set(dict(traffic.acked_on).values()),
            timeout=120,
        )
        subprocess.run(["/usr/bin/docker", "kill", victim], check=True, capture_output=True)
        killed_at = time.monotonic()
        acked_at_kill, consumed_at_kill, failed_at_kill = len(traffic.acked), len(traffic.consumed), len(traffic.errors)
        acked_before_kill = dict(traffic.acked_on)
        lost_masters_held = {k for k, b in acked_before_kill.items() if b in orphaned}
        assert lost_masters_held, f"no message was acknowledged by {sorted(orphaned)} before the kill"
        kube.wait_for(f"{victim} NotReady", lambda: not _node_ready(kube, victim), timeout=120, interval=2)

        # Reads with the master gone: once the NameServers have dropped it, a consumer group that starts
        # now reads the group's messages from the slave, from the first offset.
        with BlockingAdmin(namesrv) as admin:

            def masters_dropped() -> bool:
                try:
                    route = admin.topic_route(DRAIN_TOPIC)
                except TopicNotExist as exc:  # not while the slaves are registered: say why
                    raise AssertionError(f"{exc}\n{_route_views(kube, ns)}") from None
                return all(0 not in getattr(route.broker(b), "broker_addrs", {}) for b in orphaned)

            kube.wait_for("the NameServers to drop the lost masters", masters_dropped, timeout=120, interval=2)
        dropped_in = time.monotonic() - killed_at
        readers = BlockingPushConsumer(
            f"SlaveReaders{uuid.uuid4().hex[:6]}",
            namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        readers.subscribe(DRAIN_TOPIC, "*")

        def read(msgs: list[Any]) -> ConsumeStatus:
            slave_reads.update(m.keys[0] for m in msgs if m.keys)
            return ConsumeStatus.CONSUME_SUCCESS

        readers.register_listener(read)
        readers.start()
        try:
            kube.wait_for(
                "the lost masters' acknowledged messages, read from their slaves",
                lambda: lost_masters_held <= slave_reads,
                timeout=120,
                interval=1,
            )
        finally:
            readers.shutdown()
        assert not _node_ready(kube, victim), "the node came back before the slave reads were checked"
        by_group: dict[str, int] = {}
        for k in set(traffic.acked_on) - set(acked_before_kill):
            by_group[traffic.acked_on[k]] = by_group.get(traffic.acked_on[k], 0) + 1
        outage = {
            "acked": len(traffic.acked) - acked_at_kill,
            "acked_per_group": by_group,
            "failed": len(traffic.errors) - failed_at_kill,
            "consumed": len(traffic.consumed) - consumed_at_kill,
            "masters_dropped_after_s": round(dropped_in),
            "read_from_slaves": len(lost_masters_held),
            "seconds": round(time.monotonic() - killed_at),
        }
        subprocess.run(["/usr/bin/docker", "start", victim], check=True, capture_output=True)
        kube.wait_for(f"{victim} Ready again", lambda: _node_ready(kube, victim), timeout=300, interval=2)
        kube.wait_for(
            "Ready=True after the node's return", lambda: ready_status(kube, ns, "spread"), timeout=420, interval=2
        )
        back_in = time.monotonic() - killed_at
        acked_before = len(traffic.acked)
        kube.wait_for("sends acknowledged again", lambda: len(traffic.acked) > acked_before + 50, timeout=180)
        traffic.stop_sending()
        missing = traffic.drain(180)
        views = _route_views(kube, ns) if missing else ""
    finally:
        subprocess.run(["/usr/bin/docker", "start", victim], capture_output=True)
        traffic.close()
    print(
        f"\nkilled {victim} (masters of {sorted(orphaned)}); while it was gone: {outage}; "
        f"cluster Ready again {back_in:.0f} s after the kill; {len(traffic.acked)} acknowledged in all"
        f" (first failure: {traffic.errors[failed_at_kill] if len(traffic.errors) > failed_at_kill else '-'})"
    )
    assert not missing, f"{len(missing)} acknowledged messages never consumed, e.g. {sorted(missing)[:5]}\n{views}"


def _policy_kernel_missing(node: str) -> str | None:
    """kube-router's policy controller keeps the pods a policy selects in ipsets of type hash:ip and hash:net
    and matches them with iptables' `set` match. Returns what the node's kernel refuses, naming the missing
    kernel option, or None when it has them all."""
    script = (
        "clean() { iptables -w -F RC-PROBE 2>/dev/null; iptables -w -X RC-PROBE 2>/dev/null; "
        "ipset destroy rc-probe-ip 2>/dev/null; ipset destroy rc-probe-net 2>/dev/null; }; "
        'fail() { echo "$1 missing: $2"; clean; exit 1; }; '
        'e=$(ipset create rc-probe-ip hash:ip 2>&1) || fail "CONFIG_IP_SET or CONFIG_IP_SET_HASH_IP" "$e"; '
        'e=$(ipset create rc-probe-net hash:net 2>&1) || fail CONFIG_IP_SET_HASH_NET "$e"; '
        "iptables -w -N RC-PROBE; "
        "e=$(iptables -w -A RC-PROBE -m set --match-set rc-probe-ip src -j RETURN 2>&1) || "
        'fail CONFIG_NETFILTER_XT_SET "$e"; '
        "clean"
    )
    p = subprocess.run(["/usr/bin/docker", "exec", node, "sh", "-c", script], capture_output=True, text=True)
    if p.returncode == 127 or "ipset: not found" in p.stdout + p.stderr:
        return "the node image has no ipset tool (rebuild it: make kind-build)"
    return None if p.returncode == 0 else (p.stdout + p.stderr).strip().splitlines()[0]


def _require_policy_engine(kube: Kube) -> None:
    """Skip when the kernel cannot enforce NetworkPolicies (saying which part it lacks); fail when it can
    and kube-router's policy controller is not Ready on every node."""
    worker = next(
        n["metadata"]["name"]
        for n in kube.get("nodes")["items"]
        if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]
    )
    refusal = _policy_kernel_missing(worker)
    if refusal:
        pytest.skip(
            f"NetworkPolicies cannot be enforced on this kernel (kube-router needs ipset and xt_set): {refusal}"
        )
    kube.run("rollout", "status", "-n", "kube-system", "daemonset/kube-router", "--timeout=120s", timeout=150)


def _probe_results(kube: Kube, pods: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Runs the probe pods (name -> manifest) and returns name -> (phase, log)."""
    for manifest in pods.values():
        kube.apply(json.dumps(manifest))

    def phase(name: str) -> str | None:
        ns = pods[name]["metadata"]["namespace"]
        p = kube.get("-n", ns, "pod", pods[name]["metadata"]["name"]).get("status", {}).get("phase")
        return p if p in ("Succeeded", "Failed") else None

    out = {}
    for name, manifest in pods.items():
        done = kube.wait_for(f"the probe {name}", lambda name=name: phase(name), timeout=120)
        log = kube.run("logs", "-n", manifest["metadata"]["namespace"], manifest["metadata"]["name"], check=False)
        out[name] = (done, log.strip())
    return out


def _probe_pod(name: str, ns: str, image: str, *targets: str) -> dict[str, Any]:
    """A pod that tries a TCP connection to each target (host:port) once a second for 30 s and prints, per
    target, the outcome of its last try ("connected", or "refused: <error>", a timeout included) and how
    many tries connected; it exits 0 only if every last try connected. The last try is the verdict because
    a policy engine acts on a new pod only once it has seen it: in the first seconds a pod a policy refuses
    can connect, and one it admits can be refused."""
    pairs = [(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for t in targets]
    code = (
        "import socket, sys, time\n"
        "ok = True\n"
        f"for host, port in {pairs!r}:\n"
        "    deadline, tries, connected = time.monotonic() + 30, 0, 0\n"
        "    while True:\n"
        "        tries += 1\n"
        "        try:\n"
        "            socket.create_connection((host, port), timeout=3).close(); last = 'connected'; connected += 1\n"
        "        except OSError as e:\n"
        "            last = f'refused: {e}'\n"
        "        if time.monotonic() > deadline:\n"
        "            break\n"
        "        time.sleep(1)\n"
        "    print(host, port, last, f'({connected}/{tries} tries connected)')\n"
        "    ok = ok and last == 'connected'\n"
        "sys.exit(0 if ok else 1)\n"
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "probe", "image": image, "imagePullPolicy": "Never", "command": ["python3", "-c", code]}
            ],
        },
    }


def test_network_policy_denying_a_namespace_blocks_its_client_pod(k8s_kind: Kube, kind_broker_image: str) -> None:
    kube = k8s_kind
    _require_policy_engine(kube)
    server_ns, open_ns, denied_ns = (_new_namespace(kube, p) for p in ("np-server", "np-open", "np-denied"))
    try:
        server = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "server", "namespace": server_ns},
            "spec": {
                "containers": [
                    {
                        "name": "server",
                        "image": kind_broker_image,
                        "imagePullPolicy": "Never",
                        "command": ["python3", "-m", "http.server", "8080"],
                        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                    }
                ]
            },
        }
        kube.apply(json.dumps(server))
        kube.run("wait", "-n", server_ns, "--for=condition=Ready", "pod/server", "--timeout=120s", timeout=150)
        target = kube.get("-n", server_ns, "pod", "server")["status"]["podIP"] + ":8080"
        deny_egress = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "deny-all-egress", "namespace": denied_ns},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"]},
        }
        kube.apply(json.dumps(deny_egress))
        results = _probe_results(
            kube, {ns: _probe_pod("client", ns, kind_broker_image, target) for ns in (open_ns, denied_ns)}
        )
        assert results[open_ns][0] == "Succeeded" and " connected (" in results[open_ns][1], results
        assert results[denied_ns][0] == "Failed" and " refused: " in results[denied_ns][1], results
    finally:
        for ns in (server_ns, open_ns, denied_ns):
            kube.run("delete", "namespace", ns, "--wait=false", check=False)
