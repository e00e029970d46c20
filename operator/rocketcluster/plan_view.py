"""The observed cluster as the planner reasons about it: which pods the spec expects, which are down.

Built once per reconcile from an `Observed` and shared by the roll and scale planners, so "a pod is down"
means the same thing to both. Groups the spec no longer has (index >= spec groups) are not members: their
pods are leaving, so they neither block a restart nor get restarted.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketcluster import names
from rocketcluster.plan_types import GroupObservation, Observed, PodObservation

__all__ = ["ClusterView", "Member", "eligible"]


@dataclass(frozen=True, slots=True)
class Member:
    """A pod the spec expects: a NameServer pod (`group` None) or pod `ordinal` of a kept broker group."""

    pod: PodObservation
    group: int | None
    update_revision: str | None

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def is_master(self) -> bool:
        return self.group is not None and self.pod.is_master

    @property
    def is_slave(self) -> bool:
        return self.group is not None and not self.pod.is_master

    @property
    def old_revision(self) -> bool:
        """The pod runs an older template than its StatefulSet's (OnDelete never replaces it by itself)."""
        return self.update_revision is not None and self.pod.revision != self.update_revision


def eligible(member: Member) -> bool:
    """spec.failover: a slave the controller may elect. The current master serves it (a slave still following an
    earlier master reads lag 0 but is outside the SyncStateSet), and the controller's SyncStateSet holds it when
    the controller could be asked."""
    return member.pod.attached and member.pod.in_sync_set is not False


class ClusterView:
    """Members, missing pods and groups of one observation."""

    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        groups: dict[int, GroupObservation] = {}
        for group in observed.broker_groups:
            groups.setdefault(group.index, group)
        self.groups = groups
        #: groups the spec keeps whose StatefulSet exists: their children are applied, their pods rolled
        self.kept = tuple(sorted(g for g, group in groups.items() if g < observed.groups and group.statefulset_exists))
        #: groups the spec keeps that have no StatefulSet yet
        self.missing_groups = tuple(g for g in range(observed.groups) if g not in self.kept)
        #: groups the spec dropped whose StatefulSet still exists, highest first (the order they are removed in)
        self.removing = tuple(
            sorted(
                (g for g, group in groups.items() if g >= observed.groups and group.statefulset_exists), reverse=True
            )
        )
        members: list[Member] = []
        missing: list[str] = []
        nameserver = observed.nameserver
        if nameserver.statefulset_exists:
            self._collect(
                nameserver.pods, None, nameserver.update_revision, observed.nameserver_replicas, members, missing
            )
        for g in self.kept:
            group = groups[g]
            self._collect(group.pods, g, group.update_revision, 1 + observed.slaves_per_group, members, missing)
        self.members = tuple(members)
        #: names of expected pods that do not exist (the StatefulSet controller is recreating them)
        self.missing = tuple(missing)

    def _collect(
        self,
        pods: tuple[PodObservation, ...],
        group: int | None,
        update_revision: str | None,
        replicas: int,
        members: list[Member],
        missing: list[str],
    ) -> None:
        by_ordinal = {pod.ordinal: pod for pod in pods}
        cluster = self.observed.cluster
        for ordinal in range(replicas):
            pod = by_ordinal.get(ordinal)
            if pod is not None:
                members.append(Member(pod, group, update_revision))
            elif group is None:
                missing.append(names.nameserver_pod(cluster, ordinal))
            else:
                missing.append(names.broker_pod(cluster, group, ordinal))

    def find(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)

    def down(self, besides: str | None = None) -> list[str]:
        """Expected pods that are not ready or do not exist, except `besides`."""
        return [m.name for m in self.members if not m.pod.ready and m.name != besides] + list(self.missing)

    def all_up(self) -> bool:
        """Every expected pod exists, is ready and, for a broker, is registered with the NameServer."""
        return not self.missing and all(m.pod.ready and (m.group is None or m.pod.registered) for m in self.members)

    def replicating(self) -> bool:
        """Every slave's replication is known to run: its lag was measured, its data has not diverged, and the
        current master serves it."""
        return all(
            m.pod.lag_bytes is not None and not m.pod.diverged and m.pod.attached for m in self.members if m.is_slave
        )

    def caught_up(self, member: Member) -> bool:
        lag = member.pod.lag_bytes
        return lag is not None and lag <= self.observed.rollout.max_slave_lag_bytes

    def settled(self, member: Member) -> bool:
        """Back in service after a restart: ready, registered (brokers) and caught up (slaves)."""
        pod = member.pod
        if not pod.ready:
            return False
        if member.group is None:
            return True
        return pod.registered and (not member.is_slave or self.caught_up(member))

    def master(self, group: int) -> PodObservation | None:
        found = self.groups.get(group)
        return None if found is None else next((p for p in found.pods if p.is_master), None)

    def in_sync_slaves(self, group: int) -> list[Member]:
        return [
            m
            for m in self.members
            if m.group == group and m.is_slave and m.pod.ready and m.pod.registered and self.caught_up(m)
        ]
