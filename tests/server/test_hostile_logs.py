"""Log lines that one cause repeats (per connection, per message) are rate-limited and counted.

The limiter itself (broker/log_limit.py) as a table with a fake clock, its timer on a real loop, the
forced clean's WARNING text, and a real store whose index directory cannot be created (one ERROR, not one
per message). The per-connection lines of a real broker are checked in test_hostile_slow.py.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from broker.log_limit import LimitedLog
from broker.store import MessageStore, MessageToStore, StoreConfig
from broker.store.retention import CleanService


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("times", "written", "count_note"),
    [
        # (seconds at which one key logs) -> which of those lines are written, and the count each carries
        ([0.0], [0.0], [None]),
        ([0.0, 1.0, 2.0, 9.9], [0.0], [None]),
        ([0.0, 1.0, 2.0, 10.0], [0.0, 10.0], [None, 2]),
        ([0.0, 10.0, 20.0], [0.0, 10.0, 20.0], [None, None, None]),
        ([0.0, 5.0, 10.5, 11.0, 12.0, 25.0], [0.0, 10.5, 25.0], [None, 1, 2]),
    ],
)
def test_one_line_per_key_per_interval_and_the_count_with_the_next(
    caplog: pytest.LogCaptureFixture, times: list[float], written: list[float], count_note: list[int | None]
) -> None:
    clock = FakeClock()
    limited = LimitedLog(logging.getLogger("broker.test.limit"), 10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="broker.test.limit"):
        for at in times:
            clock.now = at
            limited.warning("k", "line at %.1f", at)
    lines = [r.getMessage() for r in caplog.records]
    assert [float(line.split()[2]) for line in lines] == written
    for line, count in zip(lines, count_note, strict=True):
        if count is None:
            assert "suppressed" not in line
        else:
            assert f"(and {count} similar lines suppressed in the 10 s before)" in line


def test_keys_are_limited_apart(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    limited = LimitedLog(logging.getLogger("broker.test.limit"), 10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="broker.test.limit"):
        for _ in range(5):
            limited.warning("a", "a")
            limited.error("b", "b")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, "a"), (logging.ERROR, "b")]
    assert limited.suppressed("a") == 4 and limited.suppressed("b") == 4


def test_the_count_is_written_when_the_flood_stops(caplog: pytest.LogCaptureFixture) -> None:
    """On a running loop a timer writes the count at the window's end, though no line of the key follows."""

    async def flood() -> None:
        limited = LimitedLog(logging.getLogger("broker.test.limit"), 0.2)
        for i in range(100):
            limited.warning("garbage", "closing connection %d", i)
        await asyncio.sleep(0.4)
        assert limited.suppressed("garbage") == 0

    with caplog.at_level(logging.WARNING, logger="broker.test.limit"):
        asyncio.run(flood())
    assert [r.getMessage() for r in caplog.records] == [
        "closing connection 0",
        "... 99 similar lines suppressed in 0 s [garbage]",
    ]


def _message(i: int, size: int = 16) -> MessageToStore:
    return MessageToStore(
        topic="TopicTest", queue_id=0, body=(b"body %d " % i).ljust(size, b"."),
        properties={"KEYS": f"key-{i}", "UNIQ_KEY": f"U{i:08d}"}, born_timestamp=1_700_000_000_000 + i,
        born_host=("127.0.0.1", 40000),
    )  # fmt: skip


def test_an_index_file_that_cannot_be_created_is_one_error_not_one_per_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        store = MessageStore(
            StoreConfig(store_path_root_dir=tmp_path, mapped_file_size_commit_log=1 << 20,
                        max_hash_slot_num=512, max_index_num=2048, index_helper_enable=False)
        )  # fmt: skip
        await store.start()
        try:
            index_dir = store.index_service.directory
            shutil.rmtree(index_dir)
            index_dir.write_text("a file where the index directory should be")
            for i in range(30):  # each in its own index write (they are gathered for 10 ms)
                assert (await store.put(_message(i))).ok
                await asyncio.sleep(0.03)
        finally:
            await store.shutdown()

    with caplog.at_level(logging.ERROR, logger="broker.store"):
        asyncio.run(main())
    errors = [r.getMessage() for r in caplog.records if "cannot create index file" in r.getMessage()]
    assert len(errors) == 1, errors[:5]  # without the limit: one per write, 30


def test_a_forced_clean_says_so_with_the_ratio_and_the_offsets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Above diskSpaceCleanForciblyRatio young files go: a WARNING names the forced clean, the disk ratio,
    how many files were young and the CommitLog offsets deleted. Plain expiry says its offsets at INFO."""

    async def main() -> None:
        config = StoreConfig(
            store_path_root_dir=tmp_path, mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=512,
            max_index_num=2048, clean_resource_interval=600_000, index_helper_enable=False,
        )  # fmt: skip
        store = MessageStore(config)
        await store.start()
        try:
            for i in range(300):
                assert (await store.put(_message(i, size=1000))).ok
            files = list(store.commit_log.queue.files)
            assert len(files) >= 4
            min_before = store.commit_log.queue.min_offset
            forced = CleanService(
                store.config, store.commit_log.queue, store._after_commit_log_delete, usage=lambda _p: 0.93
            )
            deleted = await forced.run_once()
            assert deleted == len(files) - 1  # all but the active file, however young
            assert store.commit_log.queue.min_offset == files[-1].file_from_offset
            return min_before, files[-1].file_from_offset, deleted
        finally:
            await store.shutdown()

    with caplog.at_level(logging.INFO, logger="broker.store"):
        start, end, deleted = asyncio.run(main())
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    warnings = [m for m in messages if "forced clean" in m]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert warnings[0].startswith("forced clean: disk usage 93% of ")
    assert "is at or above diskSpaceCleanForciblyRatio 85%" in warnings[0]
    assert f"deleted {deleted} CommitLog files, {deleted} of them younger than fileReservedTime 72 h" in warnings[0]
    assert f"CommitLog offsets [{start}, {end}) are gone" in warnings[0]
    print(warnings[0])
