"""spec.failover and a lost node: a broker pod whose node went NotReady or unreachable stays Running (or
Terminating) until the node returns or someone force-deletes it, and its StatefulSet never replaces it. Pure:
the planner waits `Observed.node_lost_grace_seconds` from when the node was lost, then

- for a group whose master (the pod registered as id 0) is on a lost node: asks the controller to elect an
  in-sync replica on a node that is not lost, as the planned handover does, unless the controller already
  moved the mastership by itself (a master that stopped heartbeating is replaced without us);
- for every other pod of the group on a lost node (a slave, or the old master once the mastership is
  elsewhere): force-deletes it, so the StatefulSet recreates it and the old process is fenced at the API level
  (its pod name, address and volume claim go to the new pod).

It never force-deletes a group's master, never acts on a pod whose node is Ready and untainted, and never acts
on a group with no registered master (who is master is then unknown). A master on a lost node with no in-sync
replica to take over stays: deleting it could lose acknowledged messages, so the step is refused and reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from rocketcluster.plan_types import ElectMaster, ForceDeletePod, NodeObservation, PodObservation, Wait
from rocketcluster.plan_view import ClusterView, Member, eligible

__all__ = ["NodeLossStep", "lost_since", "plan_node_loss"]

# After an election was asked for, how soon to look whether the master moved (the controller answers at once;
# the NameServers learn the new master from its next registration, within a few seconds).
_POLL_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class NodeLossStep:
    """The elections and force-deletions to carry out, the Wait meanwhile, the Progressing message (`status`)
    and the refusals (`blocked`: a master on a lost node that no in-sync replica can replace)."""

    actions: tuple[ElectMaster | ForceDeletePod, ...] = ()
    wait: Wait | None = None
    status: str | None = None
    blocked: tuple[str, ...] = ()


def lost_since(node: NodeObservation, now: float) -> float | None:
    """When the node was lost: its Ready condition left True, or an unreachable/not-ready taint was added,
    whichever came first; None while it is Ready and untainted, or has no Ready condition yet (a new node). A
    loss whose time Kubernetes did not give counts from `now` (the grace then starts over: never act early)."""
    times: list[float] = []
    if node.ready is not None and node.ready != "True":
        times.append(node.ready_since if node.ready_since is not None else now)
    if node.tainted_since is not None:
        times.append(node.tainted_since)
    return min(times) if times else None


def plan_node_loss(view: ClusterView) -> NodeLossStep:
    observed = view.observed
    if not observed.failover or not observed.nodes:
        return NodeLossStep()
    now, grace = observed.now, observed.node_lost_grace_seconds
    lost_nodes = {n.name: since for n in observed.nodes if (since := lost_since(n, now)) is not None}
    if not lost_nodes:
        return NodeLossStep()
    actions: list[ElectMaster | ForceDeletePod] = []
    messages: list[str] = []
    blocked: list[str] = []
    retry: list[float] = []
    for g in view.kept:
        group = view.groups[g]
        pods = group.pods + group.terminating
        lost = [(p, p.node) for p in pods if p.node is not None and p.node in lost_nodes]
        if not lost:
            continue
        due: list[tuple[PodObservation, str]] = []
        for pod, node in lost:
            left = lost_nodes[node] + grace - now
            if left > 0:
                retry.append(left)
                messages.append(
                    f"pod {pod.name}'s node {node} is lost ({_seconds(now - lost_nodes[node])} s); "
                    f"acting after {_seconds(grace)} s"
                )
            else:
                due.append((pod, node))
        if not due:
            continue
        master = next((p for p in pods if p.is_master), None)
        if master is None:
            names_ = ", ".join(p.name for p, _ in due)
            blocked.append(
                f"broker group {g}: {names_} on a lost node, but no master is registered, so who is master is "
                "unknown; nothing is force-deleted until the controller has elected one"
            )
            continue
        lost_names = {p.name for p, _ in lost}
        for pod, node in due:
            if pod.name != master.name:
                actions.append(ForceDeletePod(pod.name, pod.uid, g, node))
                messages.append(f"force-deleting {pod.name} (node {node} lost)")
                continue
            targets = [(m, i) for m in _takers(view, g, lost_names) if (i := m.pod.broker_id) is not None]
            if targets:
                target, broker_id = min(targets, key=lambda t: (t[0].pod.lag_bytes or 0, t[0].pod.ordinal))
                actions.append(ElectMaster(g, target.name, broker_id, master.name, reason="MASTER_ON_LOST_NODE"))
                messages.append(
                    f"group {g}'s master {master.name} is on lost node {node}: electing {target.name} "
                    "before force-deleting it"
                )
                retry.append(_POLL_SECONDS)
            else:
                blocked.append(
                    f"broker group {g}: its master {master.name} is on lost node {node} and no in-sync replica "
                    "can take over (none ready on another node in the controller's SyncStateSet or caught up); "
                    "it is not force-deleted (that could lose acknowledged messages)"
                )
    if not retry and not actions and not blocked:
        return NodeLossStep()
    status = "; ".join(messages) or None
    if actions:  # the pod watch starts the next pass after a deletion; the poll covers an event that never comes
        retry.append(_POLL_SECONDS)
    wait = Wait("NODE_LOST", status or "", max(1.0, math.ceil(min(retry)))) if retry else None
    return NodeLossStep(tuple(actions), wait, status, tuple(blocked))


def _takers(view: ClusterView, group: int, lost: set[str]) -> list[Member]:
    """The slaves that may take over from a master on a lost node: ready and registered, on a node that is not
    lost, and either in the controller's SyncStateSet (with allAckInSyncStateSet every member holds every
    acknowledged message, and a master that does not answer has no lag to ask it for) or, when the controller
    could not be asked, caught up and served by the master as the planned handover requires."""
    return [
        m
        for m in view.members
        if m.group == group and m.is_slave and m.pod.ready and m.pod.registered and m.name not in lost
        if m.pod.in_sync_set is True or (m.pod.in_sync_set is None and view.caught_up(m) and eligible(m))
    ]


def _seconds(value: float) -> int:
    return max(0, math.floor(value))
