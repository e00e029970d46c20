"""What the kind failover tests share: a namespace with the CRD applied; one Ready group with failover on, its
master and the NameServers that outlive the master's node; reads of one RocketCluster, its pods, a node's
readiness and the master the NameServers route to."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.client.blocking import BlockingAdmin
from e2e.node_checks import Producer
from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status

if TYPE_CHECKING:
    from e2e.conftest import Kube

CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}


def first_group(cluster: str) -> str:
    """The brokerName of a cluster's first group (the operator names group i `<cluster>-<i>`)."""
    return f"{cluster}-0"


@dataclass(frozen=True)
class FailoverGroup:
    """A Ready RocketCluster of one group (master and slave) with failover on and a NameServer per node."""

    name: str
    pods: dict[str, dict[str, Any]]
    master: str  # the master's pod, as status.masters and the routes agree
    master_addr: str
    victim: str  # the master's node
    survivors: str  # the NameServers on the other nodes, as a client's namesrv list

    @property
    def broker_name(self) -> str:
        return first_group(self.name)

    def wait_new_master(self, kube: Kube) -> str:
        """The pod the surviving NameServers route to as master once it is another than before."""

        def new_master() -> str | None:
            addr = route_master(self.survivors, self.broker_name)
            return addr if addr is not None and addr != self.master_addr else None

        new_addr = kube.wait_for("a new master in the routes", new_master, timeout=180, interval=0.2)
        ip = new_addr.split(":")[0]
        return next(n for n, p in self.pods.items() if p["status"].get("podIP") == ip)

    def old_master_is_slave_of(self, kube: Kube, ns: str, new_master: str) -> bool:
        """The old master's pod is back as a Ready slave of `new_master`."""
        status = cluster_status(kube, ns, self.name)
        slaves = status.get("groupStatus", [{}])[0].get("slaves", [])
        return status.get("masters") == new_master and any(s["pod"] == self.master and s["ready"] for s in slaves)


def start_failover_group(
    kube: Kube,
    ns: str,
    name: str,
    image: str,
    operator: OperatorProcess,
    topic: str,
    failover: dict[str, Any] | None = None,
) -> FailoverGroup:
    """Apply a one-group cluster `name` (SYNC replication, required anti-affinity, a NameServer with the embedded
    controller on each of the three nodes, NetworkPolicies off: the operator runs on this host), wait until it
    is Ready and the routes name the master status.masters names, and create `topic` through the NameServers that
    do not share the master's node. `failover` adds keys to spec.failover."""
    spec = {
        "image": image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 3, "template": {"tolerations": [CONTROL_PLANE_TAINT]}},
        "placement": {"antiAffinity": "required"},
        "broker": {"groups": 1, "slavesPerGroup": 1, "replication": "SYNC"},
        "storage": {"type": "persistentClaim", "size": "128Mi"},
        "failover": {"enabled": True, "controllerStorageSize": "64Mi", **(failover or {})},
        "networkPolicy": {"enabled": False},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": name}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    try:
        kube.wait_for(f"{name} Ready", lambda: ready_status(kube, ns, name), timeout=600, interval=2)
    except AssertionError:
        listing = kube.run("get", "pods", "-n", ns, "-o", "wide", check=False)
        raise AssertionError(
            f"not Ready:\n{listing}\n{cluster_status(kube, ns, name)}\n{operator.tail(4000)}"
        ) from None
    pods = cluster_pods(kube, ns, name)
    nameservers = {n: p for n, p in pods.items() if "-nameserver-" in n}
    assert len({p["spec"]["nodeName"] for p in nameservers.values()}) == 3, "a NameServer per node"
    every_namesrv = ";".join(f"{p['status']['podIP']}:9876" for p in nameservers.values())

    def agreed() -> tuple[str, str] | None:
        """(pod, address) of the master, once status.masters and the routes name the same one."""
        addr, pod = route_master(every_namesrv, first_group(name)), cluster_status(kube, ns, name).get("masters")
        if addr is None or pod not in pods:
            return None
        return (pod, addr) if pods[pod]["status"].get("podIP") == addr.split(":")[0] else None

    master, master_addr = kube.wait_for("status.masters and the routes agree", agreed, timeout=120, interval=1)
    victim = pods[master]["spec"]["nodeName"]
    alive = [p for p in nameservers.values() if p["spec"]["nodeName"] != victim]
    survivors = ";".join(f"{p['status']['podIP']}:9876" for p in alive)
    with BlockingAdmin(survivors) as admin:
        admin.create_topic(topic, cluster=name, read_queue_nums=4, write_queue_nums=4)
    return FailoverGroup(name, pods, master, master_addr, victim, survivors)


def outage(producer: Producer, failed_before: int, acked_before: int) -> dict[str, object]:
    """What the producer saw since it had `failed_before` failures and `acked_before` acknowledgements."""
    failures = producer.failures
    return {
        "failed": len(failures) - failed_before,
        "acked": len(producer.acked) - acked_before,
        "first failure": failures[failed_before] if len(failures) > failed_before else "-",
    }


def failover_namespace(kube: Kube, prefix: str) -> Iterator[str]:
    """The CRD applied and Established, then a namespace `<prefix>-<6 hex>`; its clusters and itself deleted after."""
    kube.run("apply", "--server-side", "-f", str(CRD_FILE))
    kube.wait_established("rocketclusters.rocketcluster.io")
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    kube.run("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=150)


def cluster_status(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(kube.get("-n", ns, "rmq", name).get("status") or {})


def cluster_pods(kube: Kube, ns: str, name: str) -> dict[str, dict[str, Any]]:
    items = kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={name}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def node_ready(kube: Kube, node: str) -> bool:
    conds = kube.get("node", node)["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def route_master(namesrv: str, broker_name: str) -> str | None:
    """The address the NameServers list as the group's master (id 0); None while none answers."""
    try:
        with BlockingAdmin(namesrv) as admin:
            data = admin.cluster_info().brokers.get(broker_name)
    except Exception:  # a NameServer that does not answer this instant
        return None
    return None if data is None else data.broker_addrs.get(0)
