"""The controller's replicated state: per broker group, the ids assigned, the SyncStateSet and the master.

Pure code, no I/O and no clock: `ReplicasState` changes only through its `apply_*` methods, each of which
checks its request against the state and either changes it or refuses, deterministically from the state and
its arguments. The Raft log (broker.controller.raft) carries the calls with their arguments, so every
controller that replays the log holds the same state; what only one controller knows (which brokers it sees
alive, their heartbeat epochs and offsets) is read by the leader and passed in as arguments (`Candidate`).

Codes are RocketMQ's controller response codes (broker.protocol.codes.ResponseCode, 2000-2014).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.protocol.codes import ResponseCode

__all__ = [
    "FIRST_BROKER_ID",
    "BrokerGroup",
    "Candidate",
    "ElectOutcome",
    "Outcome",
    "ReplicasState",
    "choose_master",
]

# Controller-assigned ids start at 1 (MixAll.FIRST_BROKER_CONTROLLER_ID); 0 is the master's id on the wire.
FIRST_BROKER_ID = 1
_OK = ResponseCode.SUCCESS


@dataclass
class BrokerGroup:
    """One brokerName: registered replicas (id -> address, registerCheckCode) and its sync state."""

    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_ID
    addresses: dict[int, str] = field(default_factory=dict)
    check_codes: dict[int, str] = field(default_factory=dict)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    @property
    def master_address(self) -> str:
        return self.addresses.get(self.master_broker_id, "") if self.master_broker_id is not None else ""

    def copy(self) -> BrokerGroup:
        return BrokerGroup(
            self.cluster_name,
            self.broker_name,
            self.next_assign_broker_id,
            dict(self.addresses),
            dict(self.check_codes),
            self.master_broker_id,
            self.master_epoch,
            set(self.sync_state_set),
            self.sync_state_set_epoch,
        )


@dataclass(frozen=True)
class Candidate:
    """A broker the leader sees alive, with what its last heartbeat said (the election's sort keys)."""

    broker_id: int
    epoch: int = -1
    max_offset: int = -1
    election_priority: int = 2**31 - 1


@dataclass(frozen=True)
class Outcome:
    """The answer to one request: a response code, a remark, and the group as it is after the change."""

    code: int
    remark: str = ""
    group: BrokerGroup | None = None

    @property
    def ok(self) -> bool:
        return self.code == _OK


@dataclass(frozen=True)
class ElectOutcome(Outcome):
    """An election's answer; `changed` is true when the master or epoch moved (the brokers are told)."""

    changed: bool = False


def choose_master(candidates: Iterable[Candidate]) -> Candidate | None:
    """The election policy: highest heartbeat epoch, then largest max offset, then lowest priority value,
    then lowest id (a total order, so every controller picks the same one)."""
    ordered = sorted(candidates, key=lambda c: (-c.epoch, -c.max_offset, c.election_priority, c.broker_id))
    return ordered[0] if ordered else None


class ReplicasState:
    """All broker groups by brokerName. Only the `apply_*` methods change it."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerGroup] = {}

    def group(self, broker_name: str) -> BrokerGroup | None:
        """A copy of the group, or None when the name was never registered."""
        found = self.groups.get(broker_name)
        return found.copy() if found is not None else None

    def next_broker_id(self, broker_name: str) -> int:
        found = self.groups.get(broker_name)
        return FIRST_BROKER_ID if found is None else found.next_assign_broker_id

    def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, check_code: str) -> Outcome:
        """Give `broker_id` to the broker whose registerCheckCode (`address;millis`) is `check_code`.

        Accepted when the id is free, or already held by the same check code (a retry). A group that does
        not exist yet accepts only the first id, so two brokers racing for a new group cannot both start it.
        """
        address = check_code.split(";", 1)[0]
        if broker_id < FIRST_BROKER_ID:
            return Outcome(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"broker id {broker_id} is below 1")
        found = self.groups.get(broker_name)
        if found is None:
            if broker_id != FIRST_BROKER_ID:
                return Outcome(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"a new group starts at id {FIRST_BROKER_ID}")
            found = self.groups[broker_name] = BrokerGroup(cluster_name, broker_name)
        elif broker_id in found.addresses and found.check_codes.get(broker_id) != check_code:
            return Outcome(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"broker id {broker_id} is taken")
        found.addresses[broker_id] = address
        found.check_codes[broker_id] = check_code
        found.next_assign_broker_id = max(found.next_assign_broker_id, broker_id + 1)
        return Outcome(_OK, group=found.copy())

    def apply_broker_address(self, broker_name: str, broker_id: int, address: str) -> Outcome:
        """A registered broker came back at another address."""
        found = self.groups.get(broker_name)
        if found is None or broker_id not in found.addresses:
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "broker is not registered")
        found.addresses[broker_id] = address
        return Outcome(_OK, group=found.copy())

    def apply_elect_master(
        self,
        broker_name: str,
        requester_id: int,
        designated: bool,
        alive: list[Candidate],
        unclean: bool,
    ) -> ElectOutcome:
        """Elect a master for the group among `alive` (what the leader sees).

        `requester_id` is the broker asking (itself as master when the group never had one), the broker an
        admin designates (`designated`), or -1 when the controller itself elects after losing the master.
        Candidates are the alive SyncStateSet members; outside the set only with `unclean`
        (enableElectUncleanMaster), which can lose acknowledged messages.
        """
        found = self.groups.get(broker_name)
        if found is None:
            return ElectOutcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "broker group is not registered")
        alive_by_id = {c.broker_id: c for c in alive if c.broker_id in found.addresses}
        if found.master_epoch == 0 and found.master_broker_id is None and requester_id in found.addresses:
            return self._elected(found, requester_id)
        candidates = [alive_by_id[i] for i in sorted(found.sync_state_set) if i in alive_by_id]
        if not candidates and unclean:
            candidates = list(alive_by_id.values())
        old = found.master_broker_id
        if old is not None and old in alive_by_id and not designated:
            return ElectOutcome(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, "the master is still alive", found.copy())
        if designated:
            chosen = next((c for c in candidates if c.broker_id == requester_id), None)
        else:
            chosen = choose_master(candidates)
        if chosen is None:
            if requester_id == -1 and not designated and found.master_broker_id is not None:
                # The controller lost the master and nobody can take its place: clear it, so that no
                # broker keeps acting on the old term, and bump the epoch so the clearing is ordered.
                found.master_broker_id = None
                found.master_epoch += 1
                return ElectOutcome(
                    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, "no replica can be master", found.copy(), True
                )
            return ElectOutcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "no eligible replica", found.copy())
        if chosen.broker_id == old:
            return ElectOutcome(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, "already the master", found.copy())
        return self._elected(found, chosen.broker_id)

    @staticmethod
    def _elected(found: BrokerGroup, broker_id: int) -> ElectOutcome:
        found.master_broker_id = broker_id
        found.master_epoch += 1
        found.sync_state_set = {broker_id}
        found.sync_state_set_epoch += 1
        return ElectOutcome(_OK, group=found.copy(), changed=True)

    def apply_alter_sync_state_set(
        self,
        broker_name: str,
        master_id: int,
        master_epoch: int,
        new_set: set[int],
        set_epoch: int,
        alive_ids: set[int],
    ) -> Outcome:
        """The master's proposal of a new SyncStateSet, checked in RocketMQ's order; the epoch +1 on success.

        A master that lost its place is refused here (2002 not the master, 2000 stale master epoch), so it
        can never shrink the set to itself and acknowledge alone. Every member, the master too, must be alive
        in the leader's view: a proposal a master sent just before it died is not applied after its death.
        """
        found = self.groups.get(broker_name)
        if found is None:
            return Outcome(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "broker group is not registered")
        if new_set == found.sync_state_set:
            return Outcome(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "the set is unchanged", found.copy())
        if found.master_broker_id != master_id:
            return Outcome(ResponseCode.CONTROLLER_INVALID_MASTER, "the sender is not the master", found.copy())
        if found.master_epoch != master_epoch:
            return Outcome(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, "stale master epoch", found.copy())
        if found.sync_state_set_epoch != set_epoch:
            return Outcome(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, "stale set epoch", found.copy())
        for replica in sorted(new_set):
            if replica not in found.addresses:
                return Outcome(ResponseCode.CONTROLLER_INVALID_REPLICAS, f"replica {replica} is not registered")
            if replica not in alive_ids:
                return Outcome(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, f"replica {replica} is not alive")
        if master_id not in new_set:
            return Outcome(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "the set must hold the master")
        found.sync_state_set = set(new_set)
        found.sync_state_set_epoch += 1
        return Outcome(_OK, group=found.copy())

    def apply_clean_broker_data(
        self, broker_name: str, broker_ids: set[int] | None, clean_living: bool, alive_ids: set[int]
    ) -> Outcome:
        """Forget a group (no ids) or some of its replicas; refused (2009) while what it drops is in use,
        unless `clean_living` (cleanBrokerMetadata -l)."""
        found = self.groups.get(broker_name)
        if found is None:
            return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "broker group is not registered")
        if not clean_living:
            if not broker_ids and found.master_broker_id is not None:
                return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "the group has a master")
            living = sorted((broker_ids or set()) & alive_ids)
            if living:
                return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, f"broker {living[0]} is alive")
        if not broker_ids:
            del self.groups[broker_name]
            return Outcome(_OK)
        for broker_id in broker_ids:
            found.addresses.pop(broker_id, None)
            found.check_codes.pop(broker_id, None)
            found.sync_state_set.discard(broker_id)
            if found.master_broker_id == broker_id:
                found.master_broker_id = None
        if not found.addresses:
            del self.groups[broker_name]
        return Outcome(_OK, group=self.group(broker_name))
