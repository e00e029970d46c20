"""Changing the number of broker groups: creating new groups, and draining and removing the highest ones.

Scale-out is not disruptive: every missing group is created at once, and once a new group's master is ready
and registered it gets the cluster's topics and subscription groups (CopyMetadata, once). A cluster being
created from nothing has no metadata to copy, so its groups are not "new".

Scale-in removes only the groups above spec.broker.groups, highest first. Each is drained: its write
permission is wiped (producers move to the other groups), and once its consumer lag is 0 and it holds no
message that no consumer group reads, it is deleted, its volumes too when retention.whenScaled is Delete.
Messages nobody reads (a topic produced to before any consumer exists, delayed messages not yet delivered)
block the drain at once with ScaleDownBlocked (UnreadMessages), naming the topics and counts: waiting would
not help unless a consumer appears. A drain past drainTimeoutSeconds deletes nothing and reports
ScaleDownBlocked (DrainTimedOut). Raising the timeout, setting scaleDown.drain false (which deletes the group
as it is) or scaling back up (which gives the group its write permission back) ends either. Starting a drain
and deleting a group are disruptive, so they happen only while every pod the spec keeps is up and no pod is
being restarted (`hold` says why not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketcluster.plan_progress import DrainProgress
from rocketcluster.plan_types import Action, AddWritePerm, CopyMetadata, CreateGroup, DeleteGroup, Wait, WipeWritePerm
from rocketcluster.plan_view import ClusterView

__all__ = ["ScaleInStep", "ScaleOutStep", "plan_scale_in", "plan_scale_out"]

_SCALE_OUT_POLL_SECONDS: Final = 10.0
_DRAIN_POLL_SECONDS: Final = 30.0
_BLOCKED_POLL_SECONDS: Final = 60.0


@dataclass(frozen=True, slots=True)
class ScaleOutStep:
    """`fresh`: no group existed yet (the cluster is being created). `status`: the ScalingOut message."""

    actions: tuple[Action, ...] = ()
    wait: Wait | None = None
    new_groups: tuple[int, ...] = ()
    fresh: bool = False
    status: str | None = None


@dataclass(frozen=True, slots=True)
class ScaleInStep:
    """`status`: the Draining message; `blocked`: the ScaleDownBlocked (reason, message) pairs, UnreadMessages
    first; `cancelled`: the message about drains ended by scaling back up."""

    actions: tuple[Action, ...] = ()
    wait: Wait | None = None
    draining: tuple[DrainProgress, ...] = ()
    status: str | None = None
    blocked: tuple[tuple[str, str], ...] = ()
    cancelled: str | None = None


def plan_scale_out(view: ClusterView) -> ScaleOutStep:
    observed = view.observed
    fresh = not any(group.statefulset_exists for group in view.groups.values())
    actions: list[Action] = [CreateGroup(g, "CREATE" if fresh else "SCALE_OUT") for g in view.missing_groups]

    def copied(g: int) -> bool | None:
        group = view.groups.get(g)
        return None if group is None else group.metadata_copied

    new = set(observed.progress.new_groups) | {g for g in view.groups if copied(g) is False}
    if not fresh:
        new |= set(view.missing_groups)
    new = {g for g in new if g < observed.groups and copied(g) is not True}
    sources = [g for g in view.kept if g not in new]
    ready_sources = [g for g in sources if (master := view.master(g)) is not None and master.ready]

    messages: list[str] = []
    remaining: list[int] = []
    for g in sorted(new):
        master = view.master(g) if g in view.kept else None
        if g in view.missing_groups:
            messages.append(f"creating broker group {g}")
        elif not sources:
            continue  # every group is new: there is no metadata anywhere to copy
        elif master is None or not (master.ready and master.registered):
            messages.append(f"waiting for broker group {g}'s master to be ready and registered")
        elif not ready_sources:
            messages.append(f"broker group {g} waits for a ready master to copy topics from")
        else:
            actions.append(CopyMetadata(g, ready_sources[0]))
            messages.append(f"copying topics and subscription groups to broker group {g}")
            continue
        remaining.append(g)

    status = "; ".join(messages) if messages else None
    wait = Wait("SCALING_OUT", status, _SCALE_OUT_POLL_SECONDS) if remaining and status else None
    return ScaleOutStep(tuple(actions), wait, tuple(remaining), fresh, status)


def plan_scale_in(view: ClusterView, hold: str | None) -> ScaleInStep:
    """`hold`: why nothing disruptive may happen now (None when it may)."""
    observed = view.observed
    previous = {d.group: d for d in observed.progress.draining}
    restored = [g for g in sorted(previous) if g in view.kept]
    actions: list[Action] = [AddWritePerm(g) for g in restored]
    cancelled = "; ".join(f"scaled back up: broker group {g} takes writes again" for g in restored) or None

    draining: list[DrainProgress] = []
    messages: list[str] = []
    unread_blocked: list[str] = []
    timed_out: list[str] = []
    in_order = True  # a group is deleted only once every group above it is
    for g in view.removing:
        lag = view.groups[g].consumer_lag
        drain = previous.get(g)
        if drain is None:
            master = view.master(g)
            if hold is not None:
                messages.append(f"broker group {g} waits to be drained: {hold}")
            elif master is None or not master.ready:
                messages.append(f"broker group {g} waits for its master to be ready to drain it")
            else:
                actions.append(WipeWritePerm(g))
                drain = DrainProgress(g, observed.now, lag)
                if not observed.scale_down.drain:
                    actions.append(DeleteGroup(g, observed.when_scaled == "Delete", ephemeral=observed.ephemeral))
                    messages.append(f"deleting broker group {g} (scaleDown.drain is false)")
                    continue
                # the lag was measured before the wipe: only a later observation can show the group drained
                draining.append(drain)
                messages.append(f"draining broker group {g}: write permission wiped")
            in_order = False
            continue

        drain = DrainProgress(g, drain.since, drain.last_lag if lag is None else lag)
        unread = view.groups[g].unread
        drained = not observed.scale_down.drain or (lag == 0 and unread == ())
        if drained and in_order and hold is None:
            actions.append(DeleteGroup(g, observed.when_scaled == "Delete", ephemeral=observed.ephemeral))
            messages.append(f"deleting broker group {g}")
            continue
        draining.append(drain)
        in_order = False
        if drained:
            messages.append(f"broker group {g} is drained and waits: {hold or 'the groups above it go first'}")
            continue
        lag_text = "unknown" if lag is None else str(lag)
        messages.append(f"draining broker group {g}: consumer lag {lag_text}")
        if unread:
            topics = ", ".join(f"{topic} ({count})" for topic, count in unread)
            unread_blocked.append(
                f"broker group {g} holds {sum(c for _, c in unread)} message(s) that no consumer group reads: "
                f"{topics}; it is kept until they are consumed (scaleDown.drain false deletes them with the group)"
            )
        elapsed = observed.now - drain.since
        timeout = observed.scale_down.drain_timeout_seconds
        if elapsed > timeout:
            timed_out.append(
                f"broker group {g} still has consumer lag {lag_text} after {elapsed:.0f} s of draining "
                f"(drainTimeoutSeconds {timeout:g}); nothing is deleted until it is drained"
            )

    status = "; ".join(messages) if messages else None
    blocked = [
        (reason, "; ".join(found))
        for reason, found in (("UnreadMessages", unread_blocked), ("DrainTimedOut", timed_out))
        if found
    ]
    wait = None
    if blocked:
        reason = "DRAIN_BLOCKED" if unread_blocked else "DRAIN_TIMED_OUT"
        wait = Wait(reason, "; ".join(m for _, m in blocked), _BLOCKED_POLL_SECONDS)
    elif status is not None:
        wait = Wait("DRAINING", status, _DRAIN_POLL_SECONDS)
    return ScaleInStep(tuple(actions), wait, tuple(draining), status, tuple(blocked), cancelled)
