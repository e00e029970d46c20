"""What a pass learns before it plans: the brokers' facts over the admin protocol (who is registered, the
slaves' replication, write permission, a drained group's consumer lag), and the cluster facts only the API
server holds (whether claims may grow, whether the spec can be built at all).

Admin calls go over the wire through the project's own admin client, to pod IPs: the operator reaches them
from inside the cluster and from a node alike. Every admin call is bounded: a broker that does not answer in
time makes its fact unknown, which the planner treats as "not yet", never as an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from broker.client.admin import Admin
from rocketcluster import controller_access, names
from rocketcluster.broker_keys import LIVE_KEYS
from rocketcluster.cluster_access import CERT_MANAGER_CRD, AdminAccess, cert_manager_installed
from rocketcluster.kube import ApiError, Kube
from rocketcluster.model import RocketClusterSpec
from rocketcluster.observe import BrokerFacts, GroupFacts, claim_size, node_names, registered_everywhere

__all__ = ["ADMIN_TIMEOUT", "AdminSession", "broker_nodes", "unbuildable", "volume_expansion"]

log = logging.getLogger("rocketcluster.operator")

ADMIN_TIMEOUT = 5.0  # one admin call; a broker that does not answer in time is "unknown", not an error
PERM_WRITE = 0x2


class AdminSession:
    """The broker admin client for one reconcile, to the NameServers' pod IPs; None-safe when none is up."""

    def __init__(self, namesrv_addrs: list[str], access: AdminAccess | None = None) -> None:
        """`access`: the cluster's credentials and TLS (rocketcluster.cluster_access); None for an open cluster."""
        addr = ";".join(namesrv_addrs)
        if not namesrv_addrs:
            self.admin = None
        elif access is None:
            self.admin = Admin(addr)
        else:
            self.admin = Admin(client_config=access.client_config(addr))

    async def __aenter__(self) -> AdminSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.admin is not None:
            await self.admin.shutdown()

    def require(self) -> Admin:
        if self.admin is None:
            raise kopf.TemporaryError("no NameServer is ready to take admin requests", delay=10)
        return self.admin

    async def _ask(self, what: str, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, ADMIN_TIMEOUT)
        except Exception as exc:  # any failure makes the fact unknown, which the planner handles
            log.info("admin: %s failed: %s", what, exc)
            return None

    async def facts(self, cluster_name: str, spec: RocketClusterSpec, pods: list[dict[str, Any]]) -> BrokerFacts:
        if self.admin is None:
            return BrokerFacts()
        infos = await self._ask("cluster info", self.admin.cluster_info_per_nameserver())
        if not infos:
            return BrokerFacts()
        indexes = sorted(
            {
                int(g)
                for p in pods
                if (g := ((p.get("metadata") or {}).get("labels") or {}).get(names.LABEL_GROUP)) and g.isdigit()
            }
        )
        groups: dict[int, GroupFacts] = {}
        in_sync: dict[str, frozenset[int]] | None = None
        if spec.failover.enabled and indexes:  # the controller's SyncStateSets: who a handover may go to
            group_names = [names.broker_name(cluster_name, g) for g in indexes]
            in_sync = await self._ask("SyncStateSets", controller_access.sync_state_sets(pods, group_names))
        for g in indexes:
            broker_name = names.broker_name(cluster_name, g)
            registered = registered_everywhere(
                [data.broker_addrs if (data := info.brokers.get(broker_name)) else {} for info in infos.values()]
            )
            lag: dict[int, int | None] = {}
            diverged: dict[int, str] = {}
            detached: set[int] = set()
            writable = consumer_lag = unread = None
            if 0 in registered:
                if len(registered) > 1:
                    replication = await self._ask(f"{broker_name} lag", self.admin.replication_lag(broker_name))
                    if replication is not None:
                        lag = {s.broker_id: s.lag_bytes for s in replication.slaves}
                        diverged = {s.broker_id: s.diverged for s in replication.slaves if s.diverged}
                        detached = {s.broker_id for s in replication.slaves if s.attached is False}
                route = await self._ask(f"{broker_name} route", self.admin.topic_route(broker_name))
                if route is not None:
                    perms = [q.perm for q in route.queue_datas if q.broker_name == broker_name]
                    writable = bool(perms) and all(p & PERM_WRITE for p in perms)
                if g >= spec.broker.groups:  # only a group being drained needs its consumer lag
                    found = await self._ask(f"{broker_name} consumer lag", self.admin.consumer_lag(broker_name))
                    if found is not None:
                        consumer_lag, unread = found.total, found.unread_per_topic
            live_config = await self._live_config(broker_name, registered) if g < spec.broker.groups else {}
            groups[g] = GroupFacts(
                registered=registered,
                live_config=live_config,
                lag_bytes=lag,
                diverged=diverged,
                detached=frozenset(detached),
                writable=writable,
                consumer_lag=consumer_lag,
                unread=unread,
                in_sync=None if in_sync is None else in_sync.get(broker_name),
            )
        return BrokerFacts(groups)

    async def _live_config_of(self, what: str, addr: str) -> dict[str, str] | None:
        found = await self._ask(what, self.require().broker_config(addr))
        return None if found is None else {k: v for k, v in found.items() if k in LIVE_KEYS}

    async def _live_config(self, broker_name: str, registered: Mapping[int, str]) -> dict[int, dict[str, str]]:
        """brokerId -> the values of the keys the broker applies at run time, as it holds them now (each
        broker of the group: a slave is updated like its master); a broker that did not answer is left out."""
        ids = sorted(registered)
        found = await asyncio.gather(*(self._live_config_of(f"{broker_name}/{i} config", registered[i]) for i in ids))
        return {i: values for i, values in zip(ids, found, strict=True) if values is not None}


async def volume_expansion(
    kube: Kube,
    namespace: str,
    label: Mapping[str, str],
    spec: RocketClusterSpec,
    statefulsets: list[dict[str, Any]],
) -> bool | None:
    """Whether the brokers' claims may grow (their StorageClass's allowVolumeExpansion), asked only while some
    StatefulSet's claim size differs from the spec's; None when it could not be told."""
    sizes = {claim_size(sts) for sts in statefulsets} - {None}
    if spec.storage.type != "persistentClaim" or sizes <= {spec.storage.size}:
        return None
    claims = await kube.list("v1", "PersistentVolumeClaim", namespace, label)
    # the class the claims really have: with no storageClassName in the spec, the default class at creation
    classes = {(c.get("spec") or {}).get("storageClassName") for c in claims} - {None}
    cls = next(iter(classes), None) if len(classes) <= 1 else None
    cls = cls or spec.storage.storage_class_name
    if not cls:
        return None
    found = await kube.get("storage.k8s.io/v1", "StorageClass", None, str(cls))
    return None if found is None else found.get("allowVolumeExpansion") is True


async def unbuildable(kube: Kube, spec: RocketClusterSpec) -> tuple[str, str] | None:
    """A spec the schema accepts but the cluster cannot build: (reason, message), else None."""
    cls = spec.storage.storage_class_name
    if (
        spec.storage.type == "persistentClaim"
        and cls
        and await kube.get("storage.k8s.io/v1", "StorageClass", None, cls) is None
    ):
        return "StorageClassNotFound", f"spec.storage.storageClassName: StorageClass {cls!r} does not exist"
    tls = spec.security.tls
    if tls.enabled and tls.issuer_ref is not None and not await cert_manager_installed(kube):
        return "CertManagerMissing", (
            f"spec.security.tls.issuerRef: cert-manager's CRD {CERT_MANAGER_CRD} is not installed "
            "(install cert-manager, or give spec.security.tls.secretName)"
        )
    return None


async def broker_nodes(kube: Kube, spec: RocketClusterSpec, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """With spec.failover, the Nodes the broker pods are bound to (a get each: listing would read every node of a
    large cluster on every pass). A node that no longer exists is left out. A refusal (an operator installed by
    an older chart, without the right to read nodes) is logged, and the node-loss planner then has no input: it
    acts on no pod."""
    if not spec.failover.enabled:
        return []
    wanted = node_names(pods)
    try:
        found = await asyncio.gather(*(kube.get("v1", "Node", None, n) for n in wanted))
    except ApiError as exc:
        if exc.status != 403:
            raise
        log.warning("cannot read the broker pods' nodes (%s): pods on a lost node are not fenced", exc)
        return []
    return [node for node in found if node is not None]
