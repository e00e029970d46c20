"""SyncState (a controller-mode master's SyncStateSet) and EpochFile (the epoch history), by tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.ha.epoch_file import EpochEntry, EpochFile
from broker.ha.sync_state import ReplicaAck, SyncState


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_threshold_waits_for_every_member() -> None:
    sync = SyncState(1, {1, 2, 3})
    assert sync.threshold([ReplicaAck(2, 500), ReplicaAck(3, 300)], 900) == 300
    # a member with no connection holds nothing: puts wait (and time out) rather than skip it
    assert sync.threshold([ReplicaAck(2, 500)], 900) == -1
    # a replica outside the set does not count
    assert sync.threshold([ReplicaAck(2, 500), ReplicaAck(3, 300), ReplicaAck(4, 0)], 900) == 300
    assert SyncState(1).threshold([ReplicaAck(2, 5)], 900) == 900


def test_a_proposal_never_shrinks_what_puts_wait_for() -> None:
    sync = SyncState(1, {1, 2, 3}, set_epoch=4)
    sync.proposed = {1, 2}
    assert sync.members == {1, 2, 3}
    sync.proposed = {1, 2, 3, 4}
    assert sync.members == {1, 2, 3, 4}
    sync.adopt({1, 2}, 5)
    assert (sync.members, sync.set_epoch, sync.proposed) == ({1, 2}, 5, None)
    sync.adopt({1, 2, 3}, 3)  # an older answer is not adopted
    assert sync.members == {1, 2}


@pytest.mark.parametrize(
    ("members", "replicas", "lagging_for", "wanted"),
    [
        # caught-up members stay
        ({1, 2, 3}, [ReplicaAck(2, 1000), ReplicaAck(3, 1000)], 0, {1, 2, 3}),
        # a member without a connection goes
        ({1, 2, 3}, [ReplicaAck(2, 1000)], 0, {1, 2}),
        # a member lagging longer than haMaxTimeSlaveNotCatchup goes
        ({1, 2, 3}, [ReplicaAck(2, 1000), ReplicaAck(3, 10)], 20, {1, 2}),
        # a replica that holds what the members hold joins
        ({1, 2}, [ReplicaAck(2, 800), ReplicaAck(3, 800)], 0, {1, 2, 3}),
        # one behind the members does not
        ({1, 2}, [ReplicaAck(2, 800), ReplicaAck(3, 700)], 0, {1, 2}),
        # a master alone takes a replica only once it holds everything
        ({1}, [ReplicaAck(2, 999)], 0, {1}),
        ({1}, [ReplicaAck(2, 1000)], 0, {1, 2}),
    ],
)
def test_wanted_set(members: set[int], replicas: list[ReplicaAck], lagging_for: float, wanted: set[int]) -> None:
    clock = Clock()
    sync = SyncState(1, members, clock=clock)
    sync.observe([ReplicaAck(i, 1000) for i in members - {1}], 1000, fallbehind_max=100)
    clock.now += lagging_for
    sync.observe(replicas, 1000, fallbehind_max=100)
    assert sync.wanted(replicas, 1000, max_time_not_catchup=15.0) == wanted


def test_nth_ack_counts_members() -> None:
    sync = SyncState(1, {1, 2, 3})
    acks = [ReplicaAck(2, 500), ReplicaAck(3, 300), ReplicaAck(4, 900)]
    assert sync.nth_ack(acks, 1, 1000) == 500
    assert sync.nth_ack(acks, 2, 1000) == 300
    assert sync.nth_ack(acks, 3, 1000) == -1
    assert sync.nth_ack(acks, 0, 1000) == 1000


def test_epoch_file_round_trip_and_backup(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    assert epochs.load() == [] and epochs.last_epoch == -1
    epochs.append(1, 0)
    epochs.append(2, 4096)
    assert EpochFile(path).load() == [EpochEntry(1, 0), EpochEntry(2, 4096)]
    # a new master's epoch replaces what a deposed one wrote from the same epoch on
    epochs.append(2, 2048)
    assert EpochFile(path).load() == [EpochEntry(1, 0), EpochEntry(2, 2048)]
    # RocketMQ's format: count, CRC, entries
    lines = path.read_text().splitlines()
    assert lines[0] == "2" and lines[2:] == ["1-0", "2-2048"]


@pytest.mark.parametrize(
    "damage",
    ["", "2\n0\n1-0\n", "1\n12345\n1-0\n", "x\n0\n", "1\n0\n1:0\n", "\xff\xfe", "1\n0\n-1-0\n"],
)
def test_damaged_epoch_file_falls_back_to_its_backup(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    epochs.append(1, 0)
    epochs.append(2, 100)  # the backup now holds [1-0]
    path.write_text(damage)
    assert EpochFile(path).load() == [EpochEntry(1, 0)]
