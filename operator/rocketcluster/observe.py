"""From Kubernetes objects and broker facts to the planner's `Observed`, and from a `Plan` to the status.

Pure functions over plain dicts (what the API server returned) and small fact records (what the brokers
answered over the wire), so the handler stays glue and these are tested by tables.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketcluster import names
from rocketcluster.live_config import live_split, live_wanted
from rocketcluster.model import RocketClusterSpec
from rocketcluster.plan import (
    Condition,
    GroupObservation,
    LiveConfigObservation,
    NameServerObservation,
    NodeObservation,
    Observed,
    Plan,
    PodObservation,
    Progress,
    RolloutSettings,
    ScaleDownSettings,
    UpdateBrokerConfig,
)
from rocketcluster.render_external import advertised_address, external_status

__all__ = [
    "BrokerFacts",
    "GroupFacts",
    "broker_config_status",
    "build_observed",
    "build_status",
    "claim_size",
    "merge_conditions",
    "node_names",
    "node_observation",
    "pod_ip",
    "pod_observation",
    "pod_ready",
    "ready_nameserver_addrs",
    "with_rejections",
]

_REVISION_LABEL = "controller-revision-hash"
# The taints the node lifecycle controller puts on a node whose kubelet stopped reporting or reports NotReady.
_LOST_NODE_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """What the NameServer and the brokers said about one group (None: could not be asked)."""

    registered: Mapping[int, str] = field(default_factory=dict)  # brokerId -> registered address
    lag_bytes: Mapping[int, int | None] = field(default_factory=dict)  # slave brokerId -> replication lag
    diverged: Mapping[int, str] = field(default_factory=dict)  # slave brokerId -> why it stopped replicating
    detached: frozenset[int] = frozenset()  # slave brokerIds the master serves no replication connection
    writable: bool | None = None
    consumer_lag: int | None = None
    unread: Mapping[str, int] | None = None  # topic -> messages no consumer group reads
    metadata_copied: bool | None = None
    # brokerId -> the values of the keys it applies at run time (broker_keys.LIVE_KEYS), for those that answered
    live_config: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    in_sync: frozenset[int] | None = None  # spec.failover: the controller's SyncStateSet (None: not asked)


@dataclass(frozen=True, slots=True)
class BrokerFacts:
    """Facts per group index; empty when no NameServer answered."""

    groups: Mapping[int, GroupFacts] = field(default_factory=dict)


def registered_everywhere(tables: Sequence[Mapping[int, str]]) -> dict[int, str]:
    """brokerId -> address for the ids every NameServer lists with the same address ({} when none answered).

    A client asks one NameServer, any of them: a broker counts as registered only once each one knows it, so
    that `kubectl wait --for=condition=Ready` followed by `mqadmin updateTopic -c` reaches every group.
    """
    if not tables:
        return {}
    first, *rest = tables
    return {bid: addr for bid, addr in first.items() if all(t.get(bid) == addr for t in rest)}


def pod_ip(pod: Mapping[str, Any]) -> str | None:
    ip = (pod.get("status") or {}).get("podIP")
    return str(ip) if ip else None


def _ordinal(pod: Mapping[str, Any]) -> int | None:
    meta = pod.get("metadata") or {}
    index = (meta.get("labels") or {}).get(names.LABEL_POD_INDEX)
    if index is not None and str(index).isdigit():
        return int(index)
    tail = str(meta.get("name", "")).rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _waiting_reason(pod: Mapping[str, Any]) -> str | None:
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return "Unschedulable"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    return None


def pod_observation(
    pod: Mapping[str, Any],
    facts: GroupFacts | None = None,
    advertised: str | None = None,
    failover: bool = False,
    terminating: bool = False,
) -> PodObservation | None:
    """One pod as the planner sees it; None for a pod without an ordinal (not one of ours) or being deleted
    (unless `terminating`: then only pods being deleted). `advertised`: the address the broker should register
    (render_external.advertised_address); by default its pod IP and port 10911. `failover`: the controller hands
    out the broker ids, so the pod's id is the one its address is registered under (0: the master), not its
    ordinal."""
    meta = pod.get("metadata") or {}
    ordinal = _ordinal(pod)
    if ordinal is None or bool(meta.get("deletionTimestamp")) != terminating:
        return None
    ip = pod_ip(pod)
    if advertised is None and ip is not None:
        advertised = f"{ip}:{names.BROKER_MAIN_PORT}"
    registered = False
    lag: int | None = None
    diverged: str | None = None
    attached = True
    broker_id: int | None = None
    in_sync_set: bool | None = None
    if facts is not None:
        if failover:
            broker_id = next((i for i, addr in facts.registered.items() if addr == advertised), None)
        elif advertised is not None and facts.registered.get(ordinal) == advertised:
            broker_id = ordinal
        registered = broker_id is not None
        if failover and facts.in_sync is not None and broker_id is not None:
            in_sync_set = broker_id in facts.in_sync
        if broker_id is not None or not failover:
            key = ordinal if broker_id is None else broker_id
            lag = facts.lag_bytes.get(key)
            diverged = facts.diverged.get(key)
            attached = key not in facts.detached
    return PodObservation(
        name=str(meta.get("name")),
        ordinal=ordinal,
        uid=str(meta.get("uid", "")),
        ready=pod_ready(pod),
        revision=(meta.get("labels") or {}).get(_REVISION_LABEL),
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        waiting_reason=_waiting_reason(pod),
        registered=registered,
        lag_bytes=lag,
        diverged=diverged,
        attached=attached,
        broker_id=broker_id,
        master=(broker_id == 0) if failover else None,
        in_sync_set=in_sync_set,
        node=str(node) if (node := (pod.get("spec") or {}).get("nodeName")) else None,
    )


def _epoch(timestamp: object) -> float | None:
    """An RFC 3339 time of the API server ("2026-11-29T05:17:29Z") as seconds since the epoch; None if it is none."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)).timestamp()


def node_observation(node: Mapping[str, Any]) -> NodeObservation:
    """A Node as the node-loss planner sees it: its Ready condition and when it last changed, and when the
    earliest unreachable or not-ready taint was added."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    taints = (node.get("spec") or {}).get("taints") or []
    # the NoExecute taints carry timeAdded; one without it tells nothing the Ready condition does not
    added = [_epoch(t.get("timeAdded")) for t in taints if t.get("key") in _LOST_NODE_TAINTS]
    tainted = [a for a in added if a is not None]
    return NodeObservation(
        name=str((node.get("metadata") or {}).get("name", "")),
        ready=None if ready is None else str(ready.get("status")),
        ready_since=None if ready is None else _epoch(ready.get("lastTransitionTime")),
        tainted_since=min(tainted) if tainted else None,
    )


def node_names(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The nodes the broker pods are bound to, sorted: the Nodes a pass reads with spec.failover."""
    found = {
        str(node)
        for pod in pods
        if _label(pod, names.LABEL_COMPONENT) == names.COMPONENT_BROKER
        and (node := (pod.get("spec") or {}).get("nodeName"))
    }
    return sorted(found)


def _label(obj: Mapping[str, Any], key: str) -> str | None:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(key)
    return None if value is None else str(value)


def _group_index(obj: Mapping[str, Any]) -> int | None:
    value = _label(obj, names.LABEL_GROUP)
    return int(value) if value is not None and value.isdigit() else None


def ready_nameserver_addrs(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """ip:port of every ready NameServer pod: what the operator's admin client dials (pod IPs are reachable
    from inside the cluster and from the node; the cluster DNS names are not, from outside)."""
    addrs = []
    for pod in pods:
        if _label(pod, names.LABEL_COMPONENT) == names.COMPONENT_NAMESERVER and pod_ready(pod) and pod_ip(pod):
            addrs.append(f"{pod_ip(pod)}:{names.NAMESERVER_PORT}")
    return sorted(addrs)


def build_observed(
    *,
    name: str,
    generation: int,
    now: float,
    spec: RocketClusterSpec,
    annotations: Mapping[str, str],
    statefulsets: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    facts: BrokerFacts,
    status: Mapping[str, Any],
    volume_expansion: bool | None = None,
    external_hosts: Mapping[str, str] | None = None,
    nodes: Sequence[Mapping[str, Any]] = (),
) -> Observed:
    """The planner's input for one reconcile. `volume_expansion`: the claims' StorageClass allows it.
    `external_hosts`: the external Services' load balancer hosts by Service name (spec.externalAccess).
    `nodes`: with spec.failover, the Nodes the broker pods are bound to (the node-loss planner's input)."""
    ns_sts: Mapping[str, Any] | None = None
    group_sts: dict[int, Mapping[str, Any]] = {}
    for sts in statefulsets:
        component = _label(sts, names.LABEL_COMPONENT)
        if component == names.COMPONENT_NAMESERVER:
            ns_sts = sts
        elif component == names.COMPONENT_BROKER and (g := _group_index(sts)) is not None:
            group_sts[g] = sts

    ns_pods: list[PodObservation] = []
    group_pods: dict[int, list[PodObservation]] = {}
    group_terminating: dict[int, list[PodObservation]] = {}
    for pod in pods:
        component = _label(pod, names.LABEL_COMPONENT)
        if component == names.COMPONENT_NAMESERVER:
            if (obs := pod_observation(pod)) is not None:
                ns_pods.append(obs)
        elif component == names.COMPONENT_BROKER and (g := _group_index(pod)) is not None:
            ordinal = _ordinal(pod)
            advertised = None
            if ordinal is not None and spec.external_access is not None:
                advertised = advertised_address(spec, name, g, ordinal, pod, external_hosts or {}) or ""
            f = facts.groups.get(g, GroupFacts())
            obs = pod_observation(pod, f, advertised, spec.failover.enabled)
            if obs is not None:
                group_pods.setdefault(g, []).append(obs)
            elif spec.failover.enabled and (obs := pod_observation(pod, f, advertised, True, True)) is not None:
                group_terminating.setdefault(g, []).append(obs)

    groups = []
    for g in sorted(set(group_sts) | set(group_pods)):
        group_set = group_sts.get(g)
        f = facts.groups.get(g, GroupFacts())
        groups.append(
            GroupObservation(
                index=g,
                statefulset_exists=group_set is not None
                and not (group_set.get("metadata") or {}).get("deletionTimestamp"),
                update_revision=_update_revision(group_set),
                pods=tuple(sorted(group_pods.get(g, []), key=lambda p: p.ordinal)),
                terminating=tuple(sorted(group_terminating.get(g, []), key=lambda p: p.ordinal)),
                metadata_copied=f.metadata_copied,
                writable=f.writable,
                consumer_lag=f.consumer_lag,
                unread=None if f.unread is None else tuple(sorted(f.unread.items())),
                claim_size=claim_size(group_set),
                live_config=tuple(
                    LiveConfigObservation(i, addr, tuple(sorted((f.live_config.get(i) or {}).items())))
                    for i, addr in sorted(f.registered.items())
                    if i in f.live_config
                ),
            )
        )
    return Observed(
        cluster=name,
        generation=generation,
        now=now,
        groups=spec.broker.groups,
        slaves_per_group=spec.broker.slaves_per_group,
        nameserver_replicas=spec.name_server.replicas,
        replication=spec.broker.replication,
        rollout=RolloutSettings(
            pod_ready_timeout_seconds=float(spec.rollout.pod_ready_timeout_seconds),
            max_slave_lag_bytes=spec.rollout.max_slave_lag_bytes,
            require_in_sync_slave=spec.rollout.require_in_sync_slave,
        ),
        scale_down=ScaleDownSettings(
            drain=spec.scale_down.drain, drain_timeout_seconds=float(spec.scale_down.drain_timeout_seconds)
        ),
        when_scaled=spec.retention.when_scaled,
        ephemeral=spec.storage.type == "ephemeral",
        storage_size=spec.storage.size,
        volume_expansion=volume_expansion,
        paused=annotations.get(names.ANNOTATION_PAUSE_RECONCILIATION) == "true",
        manual_roll=annotations.get(names.ANNOTATION_MANUAL_ROLLING_UPDATE) == "true",
        nameserver=NameServerObservation(
            statefulset_exists=ns_sts is not None,
            update_revision=_update_revision(ns_sts),
            pods=tuple(sorted(ns_pods, key=lambda p: p.ordinal)),
        ),
        broker_groups=tuple(groups),
        progress=Progress.from_dict(status),  # the planner's record: status.rollout, .scaling and .created
        live_wanted=tuple(live_wanted(spec, _managed_live_keys(status)).items()),
        failover=spec.failover.enabled,
        nodes=tuple(node_observation(n) for n in nodes) if spec.failover.enabled else (),
        node_lost_grace_seconds=float(spec.failover.node_lost_grace_seconds),
    )


def claim_size(sts: Mapping[str, Any] | None) -> str | None:
    """The size a broker StatefulSet's data volumeClaimTemplate asks for (None: none, or no StatefulSet)."""
    for template in ((sts or {}).get("spec") or {}).get("volumeClaimTemplates") or []:
        if (template.get("metadata") or {}).get("name") == names.DATA_VOLUME:
            size = ((template.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
            return None if size is None else str(size)
    return None


def _update_revision(sts: Mapping[str, Any] | None) -> str | None:
    if sts is None:
        return None
    revision = (sts.get("status") or {}).get("updateRevision")
    return str(revision) if revision else None


def merge_conditions(
    old: Sequence[Mapping[str, Any]], new: Iterable[Mapping[str, str]], generation: int, now_iso: str
) -> list[dict[str, Any]]:
    """New conditions, keeping each one's lastTransitionTime while its status stays the same (the Kubernetes
    convention: the time tells when it last flipped, not when it was last checked). Conditions not in `new`
    (e.g. every other one while paused) are kept as they were."""
    previous = {str(c.get("type")): c for c in old}
    merged: dict[str, dict[str, Any]] = {t: dict(c) for t, c in previous.items()}
    for c in new:
        before = previous.get(c["type"])
        changed = before is None or before.get("status") != c["status"]
        merged[c["type"]] = {
            **c,
            "lastTransitionTime": now_iso if changed else before.get("lastTransitionTime", now_iso),  # type: ignore[union-attr]
            "observedGeneration": generation,
        }
    return [merged[t] for t in sorted(merged)]


def build_status(
    *,
    name: str,
    namespace: str,
    spec: RocketClusterSpec,
    plan: Plan,
    observed: Observed,
    pods: Sequence[Mapping[str, Any]],
    old_status: Mapping[str, Any],
    now_iso: str,
    external_hosts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole status the operator writes (a merge patch: `None` removes a field). `external_hosts`: as for
    build_observed."""
    cluster_name = spec.effective_cluster_name(name)
    pods_by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    group_status = []
    masters: list[PodObservation] = []
    ready_groups = 0
    for group in observed.broker_groups:
        master = next((p for p in group.pods if p.is_master), None)
        slaves = [p for p in group.pods if not p.is_master]
        state = "Active" if group.index < spec.broker.groups else "Draining"
        if group.index >= spec.broker.groups and not group.statefulset_exists:
            state = "Removing"
        if master is not None and group.index < spec.broker.groups:
            masters.append(master)
        master_up = master is not None and master.ready and master.registered
        slaves_up = len(slaves) >= spec.broker.slaves_per_group and all(s.ready for s in slaves)
        if group.index < spec.broker.groups and master_up and slaves_up:
            ready_groups += 1
        master_address = (
            advertised_address(
                spec, name, group.index, master.ordinal, pods_by_name.get(master.name, {}), external_hosts or {}
            )
            if master
            else None
        )
        group_status.append(
            {
                "index": group.index,
                "brokerName": names.broker_name(cluster_name, group.index),
                "state": state,
                "master": None
                if master is None
                else {
                    "pod": master.name,
                    "ready": master.ready,
                    "address": master_address,
                },
                "slaves": [{"pod": s.name, "ready": s.ready, "lagBytes": s.lag_bytes} for s in slaves],
                "pvcs": []
                if spec.storage.type == "ephemeral"
                else [names.broker_pvc(name, group.index, p.ordinal) for p in group.pods],
            }
        )
    ns_ready = sum(1 for p in observed.nameserver.pods if p.ready)
    conditions = merge_conditions(
        old_status.get("conditions") or [],
        [c.to_dict() for c in plan.conditions] + [_invalid_spec_clear()],
        plan.observed_generation,
        now_iso,
    )
    return {
        **plan.progress.to_dict(),
        "observedGeneration": plan.observed_generation,
        "phase": plan.phase,
        "conditions": conditions,
        "nameServer": {
            "replicas": spec.name_server.replicas,
            "readyReplicas": ns_ready,
            "addresses": [names.nameserver_pod_address(name, namespace, i) for i in range(spec.name_server.replicas)],
        },
        "groups": spec.broker.groups,
        "readyGroups": ready_groups,
        "ready": f"{ready_groups}/{spec.broker.groups}",
        "masters": ",".join(master.name for master in masters) or None,
        "labelSelector": names.broker_label_selector(name),
        "groupStatus": group_status,
        "connectionConfigMap": names.connection_config_map(name),
        "externalAccess": external_status(name, spec, pods, external_hosts or {}),
        "brokerConfig": broker_config_status(spec, plan),
    }


def _managed_live_keys(status: Mapping[str, Any]) -> list[str]:
    """status.brokerConfig.live as written by an earlier pass; anything else found there counts as none."""
    record = status.get("brokerConfig")
    live = record.get("live") if isinstance(record, Mapping) else None
    return [k for k in live if isinstance(k, str)] if isinstance(live, list) else []


def broker_config_status(spec: RocketClusterSpec, plan: Plan) -> dict[str, list[str]]:
    """status.brokerConfig: the keys set on the running brokers (spec.broker.config's run-time keys, and any
    this pass set back to its default after it left the spec), and the keys whose change rolls the pods."""
    live, restart = live_split(spec)
    reverting = {k for a in plan.actions if isinstance(a, UpdateBrokerConfig) for k, _ in a.keys}
    return {"live": sorted(set(live) | reverting), "restartOnly": restart}


def with_rejections(plan: Plan, rejected: Sequence[str]) -> Plan:
    """The plan's conditions once the API server refused some children: Degraded (ApplyRejected, naming each)
    comes first, and the cluster is not Ready while its spec is only partly applied."""
    if not rejected:
        return plan
    message = "the API server refused: " + "; ".join(rejected)
    conditions = []
    for c in plan.conditions:
        if c.type == "Degraded":
            others = [c.message] if c.status == "True" and c.message else []
            c = Condition("Degraded", "True", "ApplyRejected", "; ".join([message, *others])[:4000])
        elif c.type == "Ready" and c.status == "True":
            c = Condition("Ready", "False", "ApplyRejected", message[:4000])
        conditions.append(c)
    return dataclasses.replace(plan, conditions=tuple(conditions))


def _invalid_spec_clear() -> dict[str, str]:
    return {"type": "InvalidSpec", "status": "False", "reason": "SpecValid", "message": ""}
