"""The controller's state machine (broker.controller.state) by tables: ids, elections, SyncStateSet changes."""

from __future__ import annotations

import pytest

from broker.controller.state import Candidate, ReplicasState, choose_master
from broker.protocol.codes import ResponseCode as R


def _group(members: int = 3, master: int | None = 1) -> ReplicasState:
    """A group broker-a with ids 1..members, and `master` elected first (epoch 1, set {master})."""
    state = ReplicasState()
    for i in range(1, members + 1):
        assert state.apply_broker_id("c", "broker-a", i, f"10.0.0.{i}:10911;{i}").ok
    if master is not None:
        assert state.apply_elect_master("broker-a", master, False, [], False).ok
    return state


def test_ids_are_assigned_from_one_and_conflicts_are_refused() -> None:
    state = ReplicasState()
    assert state.next_broker_id("broker-a") == 1
    # a new group accepts only the first id
    assert state.apply_broker_id("c", "broker-a", 2, "a:1;1").code == R.CONTROLLER_BROKER_ID_INVALID
    assert state.apply_broker_id("c", "broker-a", 1, "a:1;1").ok
    assert state.next_broker_id("broker-a") == 2
    # the same check code again is a retry; another broker cannot take the id
    assert state.apply_broker_id("c", "broker-a", 1, "a:1;1").ok
    assert state.apply_broker_id("c", "broker-a", 1, "b:1;2").code == R.CONTROLLER_BROKER_ID_INVALID
    assert state.apply_broker_id("c", "broker-a", 0, "b:1;2").code == R.CONTROLLER_BROKER_ID_INVALID
    assert state.apply_broker_id("c", "broker-a", 2, "b:1;2").ok
    group = state.group("broker-a")
    assert group is not None and group.addresses == {1: "a:1", 2: "b:1"}


def test_first_election_takes_the_requester() -> None:
    state = _group(master=None)
    out = state.apply_elect_master("broker-a", 2, False, [], False)
    assert out.ok and out.changed
    assert out.group is not None
    assert (out.group.master_broker_id, out.group.master_epoch, out.group.sync_state_set) == (2, 1, {2})
    assert out.group.sync_state_set_epoch == 1


def _alive(*ids: int, epoch: int = 1, offsets: dict[int, int] | None = None) -> list[Candidate]:
    return [Candidate(i, epoch, (offsets or {}).get(i, 100)) for i in ids]


@pytest.mark.parametrize(
    ("sync_set", "alive", "unclean", "requester", "designated", "code", "master"),
    [
        # the master is alive: kept (2011)
        ({1, 2, 3}, _alive(1, 2, 3), False, -1, False, R.CONTROLLER_MASTER_STILL_EXIST, 1),
        # the master is dead: an alive member of the set takes over, the largest offset first
        ({1, 2, 3}, _alive(2, 3, offsets={2: 50, 3: 90}), False, -1, False, R.SUCCESS, 3),
        # a slave outside the set is not elected: the controller clears the master (2004)
        ({1, 2}, _alive(3), False, -1, False, R.CONTROLLER_MASTER_NOT_AVAILABLE, None),
        # ... but a broker asking gets 2012 and nothing changes
        ({1, 2}, _alive(3), False, 3, False, R.CONTROLLER_ELECT_MASTER_FAILED, 1),
        # unclean election only when enabled
        ({1, 2}, _alive(3), True, -1, False, R.SUCCESS, 3),
        # an admin designates an alive member even while the master lives
        ({1, 2, 3}, _alive(1, 2, 3), False, 2, True, R.SUCCESS, 2),
        # an admin cannot designate a broker outside the set
        ({1, 2}, _alive(1, 2, 3), False, 3, True, R.CONTROLLER_ELECT_MASTER_FAILED, 1),
    ],
)
def test_election(
    sync_set: set[int],
    alive: list[Candidate],
    unclean: bool,
    requester: int,
    designated: bool,
    code: int,
    master: int | None,
) -> None:
    state = _group()
    group = state.groups["broker-a"]
    group.sync_state_set = set(sync_set)
    before = group.master_epoch
    out = state.apply_elect_master("broker-a", requester, designated, alive, unclean)
    assert out.code == code, out.remark
    after = state.groups["broker-a"]
    assert after.master_broker_id == master
    moved = code in (R.SUCCESS, R.CONTROLLER_MASTER_NOT_AVAILABLE)
    assert after.master_epoch == before + (1 if moved else 0)
    assert out.changed == moved
    if code == R.SUCCESS:
        assert after.sync_state_set == {master}


def test_election_of_an_unknown_group_is_refused() -> None:
    out = ReplicasState().apply_elect_master("nope", 1, False, [], False)
    assert out.code == R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_policy_prefers_epoch_then_offset_then_priority_then_id() -> None:
    assert choose_master([Candidate(1, 1, 500), Candidate(2, 2, 10)]) == Candidate(2, 2, 10)
    assert choose_master([Candidate(1, 2, 5), Candidate(2, 2, 10)]) == Candidate(2, 2, 10)
    assert choose_master([Candidate(3, 2, 10, 5), Candidate(2, 2, 10, 7)]) == Candidate(3, 2, 10, 5)
    assert choose_master([Candidate(3, 2, 10), Candidate(2, 2, 10)]) == Candidate(2, 2, 10)
    assert choose_master([]) is None


@pytest.mark.parametrize(
    ("master", "master_epoch", "new_set", "set_epoch", "alive", "code"),
    [
        ({1}, 1, {1, 2}, 1, {1, 2}, R.SUCCESS),
        # a stale master epoch: a master that lost its place cannot change the set (fencing)
        ({1}, 0, {1, 2}, 1, {1, 2}, R.CONTROLLER_FENCED_MASTER_EPOCH),
        # a stale set epoch
        ({1}, 1, {1, 2}, 0, {1, 2}, R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        # not the master
        ({2}, 1, {1, 2}, 1, {1, 2}, R.CONTROLLER_INVALID_MASTER),
        # unchanged
        ({1}, 1, {1}, 1, {1, 2}, R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        # an unregistered replica
        ({1}, 1, {1, 9}, 1, {1, 9}, R.CONTROLLER_INVALID_REPLICAS),
        # a dead replica
        ({1}, 1, {1, 3}, 1, {1, 2}, R.CONTROLLER_BROKER_NOT_ALIVE),
        # a dead master: a proposal it sent before it died is not applied
        ({1}, 1, {1, 2}, 1, {2}, R.CONTROLLER_BROKER_NOT_ALIVE),
        # the set must hold the master
        ({1}, 1, {2, 3}, 1, {1, 2, 3}, R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ],
)
def test_alter_sync_state_set(
    master: set[int], master_epoch: int, new_set: set[int], set_epoch: int, alive: set[int], code: int
) -> None:
    state = _group()
    (sender,) = master
    out = state.apply_alter_sync_state_set("broker-a", sender, master_epoch, new_set, set_epoch, alive)
    assert out.code == code, out.remark
    group = state.groups["broker-a"]
    if code == R.SUCCESS:
        assert (group.sync_state_set, group.sync_state_set_epoch) == (new_set, 2)
    else:
        assert (group.sync_state_set, group.sync_state_set_epoch) == ({1}, 1)


def test_old_master_is_fenced_after_a_new_election() -> None:
    state = _group()
    assert state.apply_alter_sync_state_set("broker-a", 1, 1, {1, 2, 3}, 1, {1, 2, 3}).ok
    # master 1 dies; 2 is elected at epoch 2
    assert state.apply_elect_master("broker-a", -1, False, _alive(2, 3), False).group.master_broker_id in (2, 3)
    # the old master, back, tries to shrink the set to itself: refused
    out = state.apply_alter_sync_state_set("broker-a", 1, 1, {1}, 2, {1, 2, 3})
    assert out.code == R.CONTROLLER_INVALID_MASTER


@pytest.mark.parametrize(
    ("ids", "living", "alive", "code", "left"),
    [
        (None, False, set(), R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, {1, 2, 3}),  # the group has a master
        ({3}, False, {3}, R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, {1, 2, 3}),  # 3 is alive
        ({3}, False, {1}, R.SUCCESS, {1, 2}),
        ({1}, True, {1}, R.SUCCESS, {2, 3}),
        (None, True, {1, 2, 3}, R.SUCCESS, None),
    ],
)
def test_clean_broker_data(
    ids: set[int] | None, living: bool, alive: set[int], code: int, left: set[int] | None
) -> None:
    state = _group()
    out = state.apply_clean_broker_data("broker-a", ids, living, alive)
    assert out.code == code, out.remark
    group = state.group("broker-a")
    assert (set(group.addresses) if group else None) == left
