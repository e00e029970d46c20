"""The RocketCluster planner: from what one reconcile observed, the next safe step and the conditions to report.

    plan(observed) -> Plan(actions, progress, conditions, observed_generation)

Called by the kopf handler on every reconcile (create, update, resume and the drift timer). Pure: no clock,
no Kubernetes, no broker calls, so planning the same observation twice gives the same plan, and a settled,
unchanged cluster gives only ApplyChildren and Ready=True. The handler executes the actions in order, turns
the final Wait into `kopf.TemporaryError(delay=...)`, and stores `plan.progress.to_dict()` in status only once
every action succeeded (a failed action leaves the old progress, so the same step is planned again).

The steps come from the planners of rolls (plan_roll), scaling (plan_scale) and volume growth (plan_storage),
which share one view of the cluster (plan_view).
This module decides how they interleave, on one rule: never two disruptive steps at once.
- Creating groups, copying metadata and setting broker keys the brokers apply at run time (plan_config) are
  not disruptive: they go on beside anything else.
- A roll and a scale-in are. Whichever is under way finishes first; when neither is, the scale-in goes first
  (it removes pods the roll would otherwise restart). While groups are removed, the roll restarts only pods
  that are already down (a failing pod with an older template can still be fixed).
- No drain starts and no group is deleted while a pod the spec keeps is down or being restarted.
"""

from __future__ import annotations

import re
from typing import Final

from rocketcluster import names
from rocketcluster.plan_config import plan_live_config
from rocketcluster.plan_failover import plan_master_moves
from rocketcluster.plan_node_loss import plan_node_loss
from rocketcluster.plan_progress import DrainProgress, Progress, RollProgress
from rocketcluster.plan_roll import MANUAL_ROLLING_UPDATE, POD_HAS_OLD_REVISION, POD_STUCK, RollStep, plan_roll
from rocketcluster.plan_scale import ScaleInStep, ScaleOutStep, plan_scale_in, plan_scale_out
from rocketcluster.plan_storage import plan_storage
from rocketcluster.plan_types import (
    STUCK_REASONS,
    Action,
    AddWritePerm,
    ApplyChildren,
    ClearManualRollRequest,
    Condition,
    CopyMetadata,
    CreateGroup,
    DeleteGroup,
    DeletePod,
    ElectMaster,
    ForceDeletePod,
    GroupObservation,
    LiveConfigObservation,
    NameServerObservation,
    NodeObservation,
    Observed,
    Plan,
    PodObservation,
    RecreateStatefulSet,
    ResizeClaims,
    RolloutSettings,
    ScaleDownSettings,
    UpdateBrokerConfig,
    Wait,
    WipeWritePerm,
)
from rocketcluster.plan_view import ClusterView

__all__ = [
    "MANUAL_ROLLING_UPDATE",
    "POD_HAS_OLD_REVISION",
    "POD_STUCK",
    "STUCK_REASONS",
    "Action",
    "AddWritePerm",
    "ApplyChildren",
    "ClearManualRollRequest",
    "Condition",
    "CopyMetadata",
    "CreateGroup",
    "DeleteGroup",
    "DeletePod",
    "DrainProgress",
    "ElectMaster",
    "ForceDeletePod",
    "GroupObservation",
    "LiveConfigObservation",
    "NameServerObservation",
    "NodeObservation",
    "Observed",
    "Plan",
    "PodObservation",
    "Progress",
    "RecreateStatefulSet",
    "ResizeClaims",
    "RollProgress",
    "RolloutSettings",
    "ScaleDownSettings",
    "UpdateBrokerConfig",
    "Wait",
    "WipeWritePerm",
    "plan",
]

CONDITION_TYPES: Final = (
    "Ready",
    "Progressing",
    "Degraded",
    "ScaleDownBlocked",
    "StorageResizeBlocked",
    "ReconciliationPaused",
)
_PROGRESS_POLL_SECONDS: Final = 10.0


def plan(observed: Observed) -> Plan:
    """The next step for one RocketCluster."""
    if observed.paused:
        # No actions, and only this condition: the handler keeps the others as they were.
        paused = Condition(
            "ReconciliationPaused", "True", "Paused", "the pause-reconciliation annotation is set; nothing is changed"
        )
        return Plan((), observed.progress, (paused,), observed.generation)

    view = ClusterView(observed)
    progress = observed.progress
    draining = any(d.group in view.removing for d in progress.draining)
    scale_in_first = bool(view.removing) and (draining or progress.roll is None)
    roll = plan_roll(view, only_down=scale_in_first)
    scale_out = plan_scale_out(view)
    scale_in = plan_scale_in(view, _hold(view, roll, scale_in_first))
    storage = plan_storage(view, busy=bool(view.removing) or progress.roll is not None or roll.restarting is not None)

    moves = plan_master_moves(view)
    # A lost node is fenced beside anything else: its pods are down either way, and only this step brings them back.
    handing_over = {a.group for a in moves.actions}
    loss = plan_node_loss(view)
    fencing = tuple(a for a in loss.actions if not (isinstance(a, ElectMaster) and a.group in handing_over))

    actions: list[Action] = [ApplyChildren(view.kept, claim_sizes=storage.kept_sizes, held_replicas=moves.held)]
    actions += scale_out.actions + scale_in.actions + roll.actions + storage.actions + moves.actions + fencing
    degraded = _degraded(view, roll, scale_in, scale_out)
    if loss.blocked:
        degraded.insert(0, ("MasterOnLostNode", "; ".join(loss.blocked)))
    settled = (
        len(actions) == 1
        and loss.wait is None
        and roll.wait is None
        and scale_out.wait is None
        and scale_in.wait is None
        and moves.wait is None
        and storage.status is None
        and observed.nameserver.statefulset_exists
        and not view.missing_groups
        and not view.removing
        and view.all_up()
        and view.replicating()
        and not degraded
    )
    # Run-time broker keys restart nothing: they neither wait for nor hold up the steps above.
    actions += plan_live_config(observed)
    creating = not (progress.created or settled)
    progressing = _progressing(view, roll, scale_out, scale_in, creating, roll_first=not scale_in_first)
    if storage.status is not None:
        progressing.append(("ResizingVolumes", storage.status))
    if moves.wait is not None:
        progressing.append(("MasterHandover", moves.wait.message))
    if loss.status is not None:
        progressing.append(("NodeLost", loss.status))
    # a lost node's wait first: its reason (NODE_LOST) makes the handler pass again when the grace runs out
    wait = _merge_waits([loss.wait, roll.wait, scale_in.wait, scale_out.wait, moves.wait])
    if wait is None and progressing:
        reason, message = progressing[0]
        wait = Wait(_event_reason(reason), message, _PROGRESS_POLL_SECONDS)
    if wait is not None:
        actions.append(wait)

    conditions = (
        _ready(view, settled, progressing, degraded),
        _summary("Progressing", progressing, idle_reason="Settled"),
        _summary("Degraded", degraded, idle_reason="Healthy"),
        _summary("ScaleDownBlocked", list(scale_in.blocked), "NotBlocked"),
        _summary("StorageResizeBlocked", [storage.blocked] if storage.blocked else [], "NotBlocked"),
        Condition("ReconciliationPaused", "False", "Reconciling"),
    )
    new_progress = Progress(
        roll=roll.progress,
        draining=scale_in.draining,
        new_groups=scale_out.new_groups,
        created=progress.created or settled,
    )
    return Plan(tuple(actions), new_progress, conditions, observed.generation)


def _hold(view: ClusterView, roll: RollStep, scale_in_first: bool) -> str | None:
    """Why a drain may not start and a group may not be deleted now; None when they may."""
    if not scale_in_first:
        return "the rolling update under way goes first"
    if roll.restarting is not None:
        return f"pod {roll.restarting} is being restarted"
    down = view.down()
    return f"pods not ready: {', '.join(down)}" if down else None


def _degraded(
    view: ClusterView, roll: RollStep, scale_in: ScaleInStep, scale_out: ScaleOutStep
) -> list[tuple[str, str]]:
    """(reason, message) pairs, the most severe first."""
    observed = view.observed
    found: list[tuple[str, str]] = []
    if roll.timed_out is not None:
        found.append(("RollTimedOut", roll.timed_out))

    pods = [m.pod for m in view.members] + [p for g in view.removing for p in view.groups[g].pods]
    stuck = [f"{p.name}: {p.waiting_reason or p.phase}" for p in pods if p.stuck]
    if stuck:
        found.append(("PodStuck", "; ".join(stuck)))

    diverged = [f"{m.name}: {m.pod.diverged}" for m in view.members if m.pod.diverged]
    if diverged:
        found.append(("ReplicaDiverged", "; ".join(diverged)))

    # A master restarted by the roll, a group getting its write permission back and a group a scale-out is
    # still creating are expected to be read-only.
    # (by name: between its deletion and its re-creation the restarted pod is in no observation)
    expected = {g for g in view.kept if roll.restarting == names.broker_pod(observed.cluster, g, 0)}
    expected |= {a.group for a in scale_in.actions if isinstance(a, AddWritePerm)}
    expected |= set(scale_out.new_groups) | set(view.observed.progress.new_groups)
    # A group whose master is down takes no writes either (no failover in static mode: the pod comes back on
    # its volume), unless the roll took it down on purpose. Only once the cluster was first ready: before,
    # masters coming up are Creating, not a fault.
    masterless = [g for g in view.kept if g not in expected and observed.progress.created and not _master_up(view, g)]
    read_only = [g for g in view.kept if view.groups[g].writable is False and g not in expected and g not in masterless]
    problems = [f"broker group {g}: its master is not ready" for g in masterless]
    problems += [f"broker group {g} does not take writes" for g in read_only]
    if problems:
        found.append(("GroupNotWritable", "; ".join(problems)))

    # Under ASYNC replication a slave is always a little behind; only SYNC makes a lagging slave a fault.
    if observed.replication == "SYNC":
        limit = observed.rollout.max_slave_lag_bytes
        lagging = [
            f"{m.name} is {m.pod.lag_bytes} bytes behind its master (at most {limit})"
            for m in view.members
            if m.is_slave and m.pod.ready and m.name != roll.restarting
            if m.pod.lag_bytes is not None and m.pod.lag_bytes > limit
        ]
        if lagging:
            found.append(("SlaveOutOfSync", "; ".join(lagging)))
    return found


def _master_up(view: ClusterView, group: int) -> bool:
    master = view.master(group)
    return master is not None and master.ready


def _progressing(
    view: ClusterView,
    roll: RollStep,
    scale_out: ScaleOutStep,
    scale_in: ScaleInStep,
    creating: bool,
    roll_first: bool,
) -> list[tuple[str, str]]:
    """(reason, message) pairs, the one that names the Progressing reason first: creation, then whichever of
    the roll and the scale-in goes first, then scale-out."""
    found: list[tuple[str, str]] = []
    if creating:
        if view.missing_groups:
            what = f"creating broker groups {list(view.missing_groups)}"
        else:
            down = [m.name for m in view.members if not (m.pod.ready and (m.group is None or m.pod.registered))]
            waiting = down + list(view.missing)
            what = f"waiting for pods: {', '.join(waiting)}" if waiting else "creating the cluster"
        found.append(("Creating", what))
    disruptive = []
    if scale_in.status is not None:
        disruptive.append(("Draining", scale_in.status))
    if roll.status is not None:
        disruptive.insert(0 if roll_first else len(disruptive), ("RollingUpdate", roll.status))
    found += disruptive
    scaling_out = [scale_out.status if not scale_out.fresh else None, scale_in.cancelled]
    if any(scaling_out):
        found.append(("ScalingOut", "; ".join(m for m in scaling_out if m)))
    return found


def _ready(
    view: ClusterView, settled: bool, progressing: list[tuple[str, str]], degraded: list[tuple[str, str]]
) -> Condition:
    if settled:
        groups = len(view.kept)
        return Condition("Ready", "True", "ClusterReady", f"{groups} broker group(s) and the NameServer are ready")
    if progressing:
        return Condition("Ready", "False", *progressing[0])
    if degraded:
        return Condition("Ready", "False", *degraded[0])
    if not view.observed.nameserver.statefulset_exists:
        return Condition("Ready", "False", "PodsNotReady", "the NameServer StatefulSet does not exist yet")
    down = view.down() + [m.name for m in view.members if m.group is not None and m.pod.ready and not m.pod.registered]
    return Condition("Ready", "False", "PodsNotReady", f"not ready or not registered: {', '.join(down)}")


def _summary(type_: str, found: list[tuple[str, str]], idle_reason: str) -> Condition:
    """One condition from (reason, message) pairs: the first pair's reason, every message."""
    if not found:
        return Condition(type_, "False", idle_reason)
    return Condition(type_, "True", found[0][0], "; ".join(message for _, message in found))


def _event_reason(condition_reason: str) -> str:
    """ScalingOut -> SCALING_OUT: a condition reason spelled as the Event reasons are."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", condition_reason).upper()


def _merge_waits(waits: list[Wait | None]) -> Wait | None:
    """One Wait for the plan: the first one's reason, every message, the soonest retry."""
    present = [w for w in waits if w is not None]
    if not present:
        return None
    message = "; ".join(w.message for w in present)
    return Wait(present[0].reason, message, min(w.retry_after_seconds for w in present))
