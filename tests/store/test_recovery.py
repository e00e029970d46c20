"""Recovery: torn writes and corrupted records are cut off after the last whole record, with a log line."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from broker.protocol.message import decode_record
from broker.store import GetStatus, MessageStore
from tests.store.store_helpers import message, small_config


def fill(root: Path, count: int) -> list[tuple[int, int]]:
    """Write `count` messages and crash (leave `abort`); returns (commit-log offset, size) of each."""

    async def main() -> list[tuple[int, int]]:
        store = MessageStore(small_config(root))
        await store.start()
        out = []
        for i in range(count):
            r = await store.put(message(i, size=200))
            out.append((r.commit_log_offset, r.wrote_bytes))
        await store.shutdown()
        return out

    records = asyncio.run(main())
    (root / "abort").touch()  # as if the process had died
    return records


def restart_and_check(root: Path, expect: int) -> MessageStore:
    async def main() -> None:
        store = MessageStore(small_config(root))
        await store.start()
        try:
            assert store.get_max_offset_in_queue("TopicTest", 0) == expect
            for i in range(expect):
                got = store.get_message("g", "TopicTest", 0, i, 1)
                assert got.status is GetStatus.FOUND
                assert decode_record(got.buffers[0], verify_crc=True).properties["KEYS"] == f"key-{i}"
                got.release()
            # the store keeps working after the cut: the next put takes the next offset
            r = await store.put(message(expect, size=200))
            assert r.queue_offset == expect
        finally:
            await store.shutdown()

    asyncio.run(main())


def _file_of(root: Path, offset: int, file_size: int) -> tuple[Path, int]:
    start = offset - offset % file_size
    return root / "commitlog" / f"{start:020d}", offset - start


@pytest.mark.parametrize("kind", ["torn-zeroed", "file-cut"])
def test_torn_write_keeps_whole_records(tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    records = fill(tmp_path, 700)  # ~290 B each: 3+ files of 64 KiB
    victim = 650
    off, size = records[victim]
    path, pos = _file_of(tmp_path, off, 64 * 1024)
    cut = pos + size // 2
    if kind == "file-cut":
        os.truncate(path, cut)  # the file itself ends in the middle of the record
    else:
        with open(path, "r+b") as fh:  # the record's second half never reached the disk
            fh.seek(cut)
            fh.write(bytes(64 * 1024 - cut))
    for later in sorted((tmp_path / "commitlog").iterdir()):
        if int(later.name) > int(path.name):
            later.unlink()
    with caplog.at_level(logging.INFO, logger="broker.store"):
        restart_and_check(tmp_path, victim)
    lines = [r.getMessage() for r in caplog.records if "truncated at offset" in r.getMessage()]
    assert lines and f"truncated at offset {off} " in lines[0], caplog.text


def test_bad_crc_drops_the_record_and_everything_after(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    records = fill(tmp_path, 600)  # 4 files; a crash scan starts in the checkpoint's file, the last
    victim = 590
    off, _ = records[victim]
    path, pos = _file_of(tmp_path, off, 64 * 1024)
    with open(path, "r+b") as fh:
        fh.seek(pos + 150)  # inside the 200-byte body (it starts at 88)
        b = fh.read(1)
        fh.seek(pos + 150)
        fh.write(bytes([b[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING, logger="broker.store"):
        restart_and_check(tmp_path, victim)
    text = caplog.text
    assert f"truncated at offset {off} " in text and "BODYCRC mismatch" in text


def test_clean_restart_needs_no_scan(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fill(tmp_path, 50)
    (tmp_path / "abort").unlink()
    with caplog.at_level(logging.INFO, logger="broker.store"):
        restart_and_check(tmp_path, 50)
    assert "clean shutdown, end offset" in caplog.text
