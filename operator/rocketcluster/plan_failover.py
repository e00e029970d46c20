"""spec.failover and a lower slavesPerGroup: the controller's master may sit on an ordinal the StatefulSet is
about to drop. Pure: the planner holds that group's StatefulSet at the master's ordinal + 1 and asks the
controller to hand the mastership over to an in-sync pod it keeps; once the master is one of those, the
StatefulSet shrinks and removes only slaves. Without an in-sync pod to hand over to, it waits (the group keeps
its master and its writes) until one catches up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketcluster.plan_types import ElectMaster, Wait
from rocketcluster.plan_view import ClusterView, eligible

__all__ = ["MasterMoves", "plan_master_moves"]

_POLL_SECONDS: Final = 3.0


@dataclass(frozen=True, slots=True)
class MasterMoves:
    """(group, replicas) the StatefulSets are held at, the handovers to ask for, and the Wait meanwhile."""

    held: tuple[tuple[int, int], ...] = ()
    actions: tuple[ElectMaster, ...] = ()
    wait: Wait | None = None


def plan_master_moves(view: ClusterView) -> MasterMoves:
    observed = view.observed
    if not observed.failover:
        return MasterMoves()
    keep = 1 + observed.slaves_per_group
    held: list[tuple[int, int]] = []
    actions: list[ElectMaster] = []
    messages: list[str] = []
    for g in view.kept:
        master = view.master(g)
        if master is None or master.ordinal < keep:
            continue
        held.append((g, master.ordinal + 1))
        # members are the pods the spec keeps: ordinals below `keep`
        targets = [(m, i) for m in view.in_sync_slaves(g) if (i := m.pod.broker_id) is not None and eligible(m)]
        if master.ready and targets:
            target, broker_id = min(targets, key=lambda t: (t[0].pod.lag_bytes or 0, t[0].pod.ordinal))
            actions.append(ElectMaster(g, target.name, broker_id, master.name))
            messages.append(f"handing the mastership of group {g} from {master.name} over to {target.name}")
        else:
            messages.append(
                f"group {g}'s master {master.name} is to be removed; waiting for an in-sync pod to take over"
            )
    if not held:
        return MasterMoves()
    wait = Wait("MASTER_HANDOVER", "; ".join(messages) + " before the StatefulSet shrinks", _POLL_SECONDS)
    return MasterMoves(tuple(held), tuple(actions), wait)
