"""What the kind failover tests share: a namespace with the CRD applied, and reads of one RocketCluster, its
pods, a node's readiness and the master the NameServers route to."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from broker.client.blocking import BlockingAdmin
from e2e.operator_harness import CRD_FILE

if TYPE_CHECKING:
    from e2e.conftest import Kube


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
