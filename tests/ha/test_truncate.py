"""Where a returning replica stops agreeing with its master (RocketMQ's rule over epoch histories), and the
cut of a stopped store's CommitLog files at that point."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.ha.epoch_file import EpochEntry as E
from broker.ha.truncate import cut_commit_log, truncation_point


@pytest.mark.parametrize(
    ("local", "local_max", "master", "master_max", "point"),
    [
        # the old master wrote past the new epoch's start: cut where epoch 2 starts on the new master
        ([E(1, 0)], 900, [E(1, 0), E(2, 700)], 1500, 700),
        # a slave that is simply behind: nothing to cut beyond its own end
        ([E(1, 0), E(2, 700)], 800, [E(1, 0), E(2, 700), E(3, 1200)], 2000, 800),
        # both wrote epoch 2, the local one further than the master got (an unacknowledged tail)
        ([E(1, 0), E(2, 700)], 1300, [E(1, 0), E(2, 700), E(3, 1100)], 1500, 1100),
        # the same epoch number from another start offset is not shared: the older one decides
        ([E(1, 0), E(3, 800)], 1000, [E(1, 0), E(3, 600)], 1000, 600),
        # no shared epoch at all, or no local history
        ([E(5, 0)], 100, [E(1, 0)], 100, None),
        ([], 100, [E(1, 0)], 100, None),
    ],
)
def test_truncation_point(local: list[E], local_max: int, master: list[E], master_max: int, point: int | None) -> None:
    assert truncation_point(local, local_max, master, master_max) == point


def test_cut_commit_log(tmp_path: Path) -> None:
    size = 4096
    for start in (0, size, 2 * size):
        (tmp_path / f"{start:020d}").write_bytes(b"\x01" * size)
    (tmp_path / "not-a-commitlog-file").write_text("kept")
    dropped = cut_commit_log(tmp_path, size, size + 100)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{0:020d}", f"{size:020d}", "not-a-commitlog-file"]
    assert (tmp_path / f"{0:020d}").read_bytes() == b"\x01" * size
    kept = (tmp_path / f"{size:020d}").read_bytes()
    assert kept[:100] == b"\x01" * 100 and kept[100:] == bytes(size - 100)
    assert dropped == (size - 100) + size
