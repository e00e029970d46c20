"""SyncState: a controller-mode master's SyncStateSet, the replicas a SYNC_MASTER put waits for.

The set is changed only through the controller: `wanted()` says which replicas belong in it now (the master
itself, the members still connected and caught up within haMaxTimeSlaveNotCatchup, and connected replicas
whose acknowledgement reached what the members hold), and the broker proposes that to the controller
(CONTROLLER_ALTER_SYNC_STATE_SET), then `adopt()`s the answer. While a proposal is out, puts wait for the
union of the confirmed and the proposed sets, so the set a put waits for never shrinks before the controller
agreed: a master that lost its place cannot shrink the set (the controller refuses it) and so cannot
acknowledge a message without the replicas that the controller may elect.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["IDENTITY", "IDENTITY_SIZE", "ReplicaAck", "SyncState"]

# The first 8 bytes a controller-mode slave sends on its HA connection: its controller-assigned broker id
IDENTITY = struct.Struct(">q")
IDENTITY_SIZE = IDENTITY.size


@dataclass(frozen=True, slots=True)
class ReplicaAck:
    """One connected replica as the master sees it: its id and how far it acknowledged."""

    broker_id: int
    ack_offset: int


@dataclass
class SyncState:
    """The master `master_id`'s view of its SyncStateSet (confirmed by the controller at `set_epoch`)."""

    master_id: int
    confirmed: set[int] = field(default_factory=set)
    set_epoch: int = 0
    proposed: set[int] | None = None
    clock: Callable[[], float] = time.monotonic
    _caught_up_at: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.confirmed = set(self.confirmed) | {self.master_id}

    @property
    def members(self) -> set[int]:
        """What puts wait for: the confirmed set, grown by a proposal in flight (never shrunk by one)."""
        return self.confirmed | (self.proposed or set())

    def adopt(self, members: set[int], set_epoch: int) -> None:
        """The controller's set (its answer to a proposal, or a newer one it reported)."""
        if set_epoch >= self.set_epoch:
            self.confirmed = set(members)
            self.set_epoch = set_epoch
        self.proposed = None

    def threshold(self, replicas: Iterable[ReplicaAck], master_max: int) -> int:
        """The offset every member holds: the lowest acknowledgement among the members other than the
        master (-1 for a member with no connection), or `master_max` when the master is alone."""
        acks: dict[int, int] = {}
        for r in replicas:
            acks[r.broker_id] = max(acks.get(r.broker_id, -1), r.ack_offset)
        others = self.members - {self.master_id}
        if not others:
            return master_max
        return min(acks.get(i, -1) for i in others)

    def nth_ack(self, replicas: Iterable[ReplicaAck], count: int, master_max: int) -> int:
        """The offset at least `count` members other than the master acknowledged (`master_max` for 0)."""
        if count <= 0:
            return master_max
        acks = sorted((r.ack_offset for r in replicas if r.broker_id in self.members), reverse=True)
        return acks[count - 1] if len(acks) >= count else -1

    def observe(self, replicas: Iterable[ReplicaAck], master_max: int, fallbehind_max: int) -> None:
        """Note which replicas are caught up now (lagging less than `fallbehind_max` bytes)."""
        now = self.clock()
        for r in replicas:
            if r.ack_offset >= 0 and master_max - r.ack_offset < fallbehind_max:
                self._caught_up_at[r.broker_id] = now

    def wanted(self, replicas: list[ReplicaAck], master_max: int, max_time_not_catchup: float) -> set[int]:
        """The set this master would propose now."""
        now = self.clock()
        connected = {r.broker_id for r in replicas if r.ack_offset >= 0}
        held = self.threshold(replicas, master_max)
        keep = {self.master_id}
        for member in self.members - {self.master_id}:
            recent = now - self._caught_up_at.get(member, float("-inf")) <= max_time_not_catchup
            if member in connected and recent:
                keep.add(member)
        for r in replicas:
            if r.broker_id not in self.members and r.ack_offset >= 0 and r.ack_offset >= held:
                keep.add(r.broker_id)
        return keep
