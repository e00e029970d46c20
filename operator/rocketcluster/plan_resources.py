"""What to do about one RocketTopic or RocketConsumerGroup, and what its status says. Pure: tested by tables.

`handlers_resources` observes (the RocketCluster, its NameServers, each broker group's master and the config that
master holds), renders the wanted config per master (`render_resources`), and calls `plan_resource`; it sends the
`Write`s, then `finish` turns the plan and what the brokers answered into the Ready condition.

The rules:
- A topic or group is written on the master of every broker group the cluster's spec has (index below
  spec.broker.groups): one missing there is created, a scale-out's new group included. A group being removed
  (a drain) is left alone: a topic created there would be routed for writes again.
- **Adoption.** When the resource is first seen (status.adopted unset) and the brokers already hold the topic or
  group, it is adopted: status.adopted is true with the generation, and nothing that exists is changed while the
  generation stays that one. Differences from the spec are told in the Ready condition (reason Differs). A later
  edit of the spec (a newer generation) applies it. A master that lacks it is still given it (nothing is
  overwritten there).
- Otherwise the spec is the truth: a master whose config differs (edited by hand, or an older spec) is written.
- Two resources naming one topic (or group) of one cluster: the older one owns it; the other is `Conflict`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketcluster.observe import merge_conditions
from rocketcluster.render_resources import differences

__all__ = [
    "Master",
    "ResourceObservation",
    "ResourcePlan",
    "Write",
    "broker_made_topic",
    "finish",
    "older_owner",
    "plan_resource",
    "resource_status",
]


@dataclass(frozen=True, slots=True)
class Master:
    """One broker group's master, and the config of this topic or group it holds (None: it has none)."""

    broker_name: str
    addr: str
    existing: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class ResourceObservation:
    """What the handler saw. `problem` is (reason, message) when the cluster cannot be written to at all."""

    kind: str  # "topic" or "group", for messages
    name: str  # the RocketMQ topic or group name
    generation: int
    masters: Sequence[Master] = ()  # masters of the groups the spec has (index < spec.broker.groups)
    missing: Sequence[str] = ()  # brokerNames of those groups with no master registered
    adopted: bool | None = None  # from the status; None: not decided yet
    adopted_generation: int | None = None
    problem: tuple[str, str] | None = None  # ClusterNotFound, ClusterNotReady, Conflict, ...


@dataclass(frozen=True, slots=True)
class Write:
    broker_name: str
    addr: str
    config: Mapping[str, Any]
    created: bool  # the master had none


@dataclass(frozen=True, slots=True)
class ResourcePlan:
    writes: tuple[Write, ...] = ()
    adopted: bool | None = None
    adopted_generation: int | None = None
    ready: tuple[str, str, str] = ("False", "Unknown", "")  # status, reason, message when every write succeeds
    broker_names: tuple[str, ...] = ()  # the groups holding it once the writes succeed
    differs: tuple[str, ...] = field(default=())


def plan_resource(
    observed: ResourceObservation,
    desired: Callable[[Mapping[str, Any] | None], Mapping[str, Any]],
    fields: Sequence[str],
) -> ResourcePlan:
    """The writes and the Ready condition for one resource. `desired(existing)` renders the config a master
    should hold given the one it has; `fields` are the ones the resource manages."""
    o = observed
    if o.problem is not None:
        reason, message = o.problem
        return ResourcePlan(
            adopted=o.adopted, adopted_generation=o.adopted_generation, ready=("False", reason, message)
        )
    if not o.masters:
        groups = ", ".join(o.missing) or "none"
        return ResourcePlan(
            adopted=o.adopted,
            adopted_generation=o.adopted_generation,
            ready=("False", "ClusterNotReady", f"no broker group has a master registered yet (waiting for: {groups})"),
        )
    adopted, adopted_generation = o.adopted, o.adopted_generation
    if adopted is None:  # first sight: whatever already exists is adopted, not overwritten
        adopted = any(m.existing is not None for m in o.masters)
        adopted_generation = o.generation if adopted else None
    frozen = bool(adopted) and adopted_generation is not None and o.generation <= adopted_generation
    writes: list[Write] = []
    differs: list[str] = []
    for m in o.masters:
        want = desired(m.existing)
        if m.existing is None:
            writes.append(Write(m.broker_name, m.addr, want, created=True))
            continue
        found = differences(m.existing, want, fields)
        if not found:
            continue
        if frozen:
            differs.append(f"{m.broker_name}: {'; '.join(found)}")
        else:
            writes.append(Write(m.broker_name, m.addr, want, created=False))
    holders = tuple(sorted(m.broker_name for m in o.masters))
    where = ", ".join(holders)
    pending = f"; broker group(s) {', '.join(o.missing)} have no master registered yet" if o.missing else ""
    if differs:
        ready = (
            "False",
            "Differs",
            f"the {o.kind} {o.name} existed before this resource and was adopted as it is; it differs from the "
            f"spec ({' | '.join(differs)}). Nothing was changed: edit the spec (a new generation) to apply it"
            + pending,
        )
    elif frozen:
        ready = ("True", "Adopted", f"the {o.kind} {o.name} existed on {where} and was adopted; it matches the spec")
        ready = (ready[0], ready[1], ready[2] + pending)
    else:
        ready = ("True", "Applied", f"the {o.kind} {o.name} is on {where} as the spec says{pending}")
    return ResourcePlan(tuple(writes), adopted, adopted_generation, ready, holders, tuple(differs))


def broker_made_topic(name: str, cluster_name: str) -> str | None:
    """Why a topic is the brokers' own (they make a topic named after their cluster, one after each brokerName
    and <cluster>_REPLY_TOPIC, and route by them), else None: a RocketTopic must not adopt or change those."""
    if name == cluster_name:
        return f"{name} is the cluster's own topic (the brokers make it and route by it)"
    if name == f"{cluster_name}_REPLY_TOPIC":
        return f"{name} is the cluster's reply topic (the brokers make it)"
    if re.fullmatch(re.escape(cluster_name) + r"-[0-9]+", name):
        return f"{name} is a broker group's own topic (its brokerName; the brokers make it)"
    return None


def finish(plan: ResourcePlan, failures: Mapping[str, str], unreachable: bool) -> tuple[str, str, str]:
    """The Ready condition after the writes: the plan's, unless a broker refused or did not answer one.
    `failures` maps brokerName -> what went wrong; `unreachable` tells a timeout or lost connection from a refusal."""
    if not failures:
        return plan.ready
    told = "; ".join(f"{name}: {why}" for name, why in sorted(failures.items()))
    reason = "BrokerUnreachable" if unreachable else "BrokerRefused"
    return ("False", reason, f"not written on every broker group ({told}); retried on the next pass")


def older_owner(
    me: Mapping[str, Any], others: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any]
) -> str | None:
    """The name of another resource that names the same topic or group of the same cluster (`key` of each body)
    and came first (creationTimestamp, then name), or None: the older one owns it."""
    mine = key(me)
    my_meta = me.get("metadata") or {}
    my_order = (str(my_meta.get("creationTimestamp", "")), str(my_meta.get("name", "")))
    for other in others:
        meta = other.get("metadata") or {}
        if meta.get("uid") == my_meta.get("uid") or meta.get("deletionTimestamp"):
            continue
        if key(other) == mine and (str(meta.get("creationTimestamp", "")), str(meta.get("name", ""))) < my_order:
            return str(meta.get("name"))
    return None


def resource_status(
    *,
    name_field: str,
    name: str | None,
    cluster_name: str | None,
    generation: int,
    ready: tuple[str, str, str],
    plan: ResourcePlan | None,
    old: Mapping[str, Any],
    now_iso: str,
    invalid: bool = False,
) -> dict[str, Any]:
    """The status to merge-patch: the Ready condition (and InvalidSpec), the names, and adoption. Without a plan
    (an invalid spec) what the old status said about adoption and the brokers is kept."""
    status, reason, message = ready
    conditions = [
        {"type": "Ready", "status": status, "reason": reason, "message": message[:4000]},
        {
            "type": "InvalidSpec",
            "status": "True" if invalid else "False",
            "reason": reason if invalid else "Valid",
            "message": message[:4000] if invalid else "",
        },
    ]
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": merge_conditions(old.get("conditions") or [], conditions, generation, now_iso),
    }
    if name is not None:
        out[name_field] = name
    if cluster_name is not None:
        out["clusterName"] = cluster_name
    if plan is not None:
        if plan.broker_names or status == "True":
            out["brokerNames"] = list(plan.broker_names)
        if plan.adopted is not None:
            out["adopted"] = plan.adopted
            out["adoptedGeneration"] = plan.adopted_generation
    return out
