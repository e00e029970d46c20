"""Rolling restarts: which pod to restart next, and whether it is safe to take it down now.

StatefulSets use `updateStrategy: OnDelete`, so a pod keeps its old template until the operator deletes it.
A pod needs a restart when its revision differs from its StatefulSet's update revision, or when a manual roll
(the manual-rolling-update annotation) lists it. Order, as Strimzi's roller does it:

1. pods that are not ready, anywhere: restarting them takes nothing more down, and a bad pod is not joined by
   a second one (a ready pod is only taken down while every other pod is up, so a down pod later in the order
   would otherwise block the roll for good);
2. then the NameServer pods, then broker group 0, 1, ... one group at a time;
3. within a component, slaves from the highest ordinal down, the master (ordinal 0) last.

With spec.failover the master is the pod the controller made master (registered as id 0), whatever its
ordinal, and it is not restarted as master: the roll first asks the controller to elect an in-sync slave
(ElectMaster), and restarts the old master once it is a slave. A planned roll so costs one election. A group
whose master is not known (an election under way) restarts none of its ready pods until it is.

One pod at a time: after a restart the next waits until the new pod is Ready, registered with the NameServer
and, for a slave, caught up. With SYNC replication (and rollout.requireInSyncSlave) a master is restarted
only while one of its slaves is in sync. A pod that does not come back within podReadyTimeoutSeconds stops
the roll there (Degraded RollTimedOut) until it comes back, or until a newer template arrives for it.

A Pending pod already on the current template is never deleted (it would be Pending again); one on an older
template is, since the new template may be what lets it schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketcluster.plan_progress import RollProgress
from rocketcluster.plan_types import Action, ClearManualRollRequest, DeletePod, ElectMaster, Wait
from rocketcluster.plan_view import ClusterView, Member, eligible

__all__ = [
    "MANUAL_ROLLING_UPDATE",
    "POD_HAS_OLD_REVISION",
    "POD_STUCK",
    "RollStep",
    "plan_roll",
]

# DeletePod reasons (Kubernetes Event reasons)
POD_HAS_OLD_REVISION: Final = "POD_HAS_OLD_REVISION"
MANUAL_ROLLING_UPDATE: Final = "MANUAL_ROLLING_UPDATE"
POD_STUCK: Final = "POD_STUCK"

# How soon to look again: a restarted pod is usually back within seconds; a blocked roll waits on others.
_RESTART_POLL_SECONDS: Final = 10.0
_BLOCKED_POLL_SECONDS: Final = 15.0
_TIMED_OUT_POLL_SECONDS: Final = 30.0
_HANDOVER_POLL_SECONDS: Final = 3.0  # an election takes well under a second; the routes follow within seconds


@dataclass(frozen=True, slots=True)
class RollStep:
    """What the roll does in this reconcile.

    `status` is the Progressing message (None when nothing is to be restarted), `timed_out` the Degraded
    RollTimedOut message, `restarting` the pod taken down for a restart that is not back yet.
    """

    actions: tuple[Action, ...] = ()
    wait: Wait | None = None
    progress: RollProgress | None = None
    status: str | None = None
    timed_out: str | None = None
    restarting: str | None = None


def plan_roll(view: ClusterView, only_down: bool = False) -> RollStep:
    """The roll's next step. `only_down` (while groups are being removed) restarts only pods that are down."""
    observed = view.observed
    roll = observed.progress.roll
    current = roll.current if roll is not None else None
    if current is not None and current not in view.missing and view.find(current) is None:
        current = None  # no longer a pod the spec expects (its group was removed, or the replicas shrank)

    actions: list[Action] = []
    manual = roll is not None and roll.manual
    manual_names = frozenset(roll.pending) if roll is not None and manual else frozenset()
    if observed.manual_roll and not manual:
        # the pod being restarted now already comes back after the request, so it is not restarted twice
        manual = True
        manual_names = frozenset(m.name for m in view.members if m.name != current)
        actions.append(ClearManualRollRequest())

    candidates = sorted(
        (m for m in view.members if m.name != current and _needs_restart(m, manual_names)), key=_roll_order
    )
    pending = tuple(m.name for m in candidates)

    if roll is not None and current is not None:
        followed = _follow_current(view, roll, current, pending, manual, actions)
        if followed is not None:
            return followed

    if not candidates:
        return RollStep(actions=tuple(actions))
    status = f"{len(candidates)} pod(s) to restart: {', '.join(pending)}"
    waiting = RollProgress(pending=pending, manual=manual)
    eligible = [m for m in candidates if not m.pod.ready] if only_down else candidates
    if not eligible:
        message = "the rolling update waits until the broker groups being removed are gone"
        return RollStep(tuple(actions), Wait("WAITING_FOR_SCALE_IN", message, _BLOCKED_POLL_SECONDS), waiting, status)
    chosen = eligible[0]
    blocked = _blocker(view, chosen)
    if blocked is not None:
        return RollStep(tuple(actions), blocked, waiting, status)
    handover = _handover(view, chosen)
    if handover is not None:
        elect, wait = handover
        return RollStep((*actions, *elect), wait, waiting, status)

    reason = _reason(chosen)
    actions.append(DeletePod(chosen.name, reason))
    left = tuple(name for name in pending if name != chosen.name)
    progress = RollProgress(left, chosen.name, chosen.pod.uid, observed.now, reason, manual)
    message = f"restarting pod {chosen.name} ({reason}); {len(left)} more to restart"
    wait = Wait("POD_RESTARTING", message, _RESTART_POLL_SECONDS)
    return RollStep(tuple(actions), wait, progress, message, restarting=chosen.name)


def _needs_restart(member: Member, manual_names: frozenset[str]) -> bool:
    if not (member.old_revision or member.name in manual_names):
        return False
    # A Pending pod on the current template would only be Pending again: leave it to the scheduler.
    return not (member.pod.pending and not member.old_revision)


def _roll_order(member: Member) -> tuple[bool, int, bool, int]:
    component = -1 if member.group is None else member.group
    return (member.pod.ready, component, member.is_master, -member.pod.ordinal)


def _reason(member: Member) -> str:
    if member.pod.stuck:
        return POD_STUCK
    return POD_HAS_OLD_REVISION if member.old_revision else MANUAL_ROLLING_UPDATE


def _follow_current(
    view: ClusterView,
    roll: RollProgress,
    current: str,
    pending: tuple[str, ...],
    manual: bool,
    actions: list[Action],
) -> RollStep | None:
    """Wait for the pod restarted last; None once it is back in service."""
    observed = view.observed
    member = view.find(current)
    replaced = member is not None and member.pod.uid != roll.current_uid
    if member is not None and replaced and view.settled(member):
        return None

    failing = member is not None and not member.pod.ready and (member.pod.stuck or member.pod.pending)
    if member is not None and replaced and failing and member.old_revision:
        # A newer template arrived while the new pod was failing (a fix, or a revert): it is down already,
        # so restarting it again takes nothing more away.
        actions.append(DeletePod(current, POD_STUCK))
        progress = RollProgress(pending, current, member.pod.uid, observed.now, POD_STUCK, manual)
        message = f"restarting pod {current} again ({POD_STUCK}): it is failing on an older template"
        wait = Wait("POD_RESTARTING", message, _RESTART_POLL_SECONDS)
        return RollStep(tuple(actions), wait, progress, message, restarting=current)

    started_at = observed.now if roll.started_at is None else roll.started_at
    progress = RollProgress(pending, current, roll.current_uid, started_at, roll.reason, manual)
    awaited = _awaited(view, member, replaced)
    timeout = observed.rollout.pod_ready_timeout_seconds
    if observed.now - started_at > timeout:
        message = (
            f"pod {current} was restarted {observed.now - started_at:.0f} s ago and is still waiting {awaited} "
            f"(podReadyTimeoutSeconds {timeout:g}); the rolling update stops here"
        )
        wait = Wait("ROLL_TIMED_OUT", message, _TIMED_OUT_POLL_SECONDS)
        return RollStep(tuple(actions), wait, progress, message, timed_out=message, restarting=current)
    message = f"waiting for restarted pod {current} {awaited}; {len(pending)} more to restart"
    wait = Wait("POD_RESTARTING", message, _RESTART_POLL_SECONDS)
    return RollStep(tuple(actions), wait, progress, message, restarting=current)


def _awaited(view: ClusterView, member: Member | None, replaced: bool) -> str:
    """What the restarted pod has not done yet, for messages."""
    if member is None or not replaced:
        return "to be recreated"
    pod = member.pod
    if not pod.ready:
        return f"to become ready ({pod.waiting_reason})" if pod.waiting_reason else "to become ready"
    if member.group is not None and not pod.registered:
        return "to register with the NameServer"
    lag = "unknown" if pod.lag_bytes is None else f"{pod.lag_bytes} bytes"
    return f"to catch up with its master (lag {lag}, at most {view.observed.rollout.max_slave_lag_bytes})"


def _handover(view: ClusterView, chosen: Member) -> tuple[tuple[Action, ...], Wait] | None:
    """spec.failover: the election that moves the mastership away from the chosen master before its restart,
    to the in-sync slave furthest ahead (a slave already on the new template first); None when the chosen pod
    is no ready master or has no in-sync slave to hand over to (then it restarts, and the controller elects
    on its loss)."""
    if not (view.observed.failover and chosen.is_master and chosen.pod.ready and chosen.group is not None):
        return None
    candidates = [
        (m, i) for m in view.in_sync_slaves(chosen.group) if (i := m.pod.broker_id) is not None and eligible(m)
    ]
    if not candidates:
        return None
    target, broker_id = min(candidates, key=lambda c: (c[0].old_revision, c[0].pod.lag_bytes or 0, c[0].pod.ordinal))
    elect = ElectMaster(chosen.group, target.name, broker_id, chosen.name)
    message = f"master {chosen.name} is next to restart; handing its mastership over to {target.name} first"
    return (elect,), Wait("MASTER_HANDOVER", message, _HANDOVER_POLL_SECONDS)


def _blocker(view: ClusterView, chosen: Member) -> Wait | None:
    """Why the chosen pod may not be taken down now, as a Wait; None when it may."""
    if not chosen.pod.ready:
        return None  # already down: restarting it takes nothing more away
    down = view.down(besides=chosen.name)
    if down:
        message = f"pod {chosen.name} is next to restart; waiting for {', '.join(down)} to be ready first"
        return Wait("WAITING_FOR_PODS", message, _BLOCKED_POLL_SECONDS)
    observed = view.observed
    if observed.failover and chosen.group is not None and view.master(chosen.group) is None:
        message = (
            f"pod {chosen.name} is next to restart; waiting until the controller's master of group "
            f"{chosen.group} is registered"
        )
        return Wait("WAITING_FOR_MASTER", message, _BLOCKED_POLL_SECONDS)
    needs_in_sync_slave = observed.replication == "SYNC" and observed.rollout.require_in_sync_slave
    if not (chosen.is_master and chosen.group is not None and needs_in_sync_slave and observed.slaves_per_group > 0):
        return None
    if any(not observed.failover or eligible(m) for m in view.in_sync_slaves(chosen.group)):
        return None
    message = (
        f"master {chosen.name} is next to restart; with SYNC replication it waits for a slave of group "
        f"{chosen.group} within {observed.rollout.max_slave_lag_bytes} bytes of it"
    )
    return Wait("WAITING_FOR_IN_SYNC_SLAVE", message, _BLOCKED_POLL_SECONDS)
