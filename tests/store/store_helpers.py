"""Helpers for store tests: a small-file StoreConfig and a running store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.store import MessageStore, MessageToStore, StoreConfig
from broker.store.dispatch_request import DispatchRequest


def small_config(root: Path, **kw: Any) -> StoreConfig:
    """Tiny files so that rolling over is exercised; small index."""
    base: dict[str, Any] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log": 64 * 1024,
        "mapped_file_size_consume_queue": 50 * 20,
        "max_hash_slot_num": 512,
        "max_index_num": 2048,
        "flush_interval_commit_log": 50,
        "flush_interval_consume_queue": 100,
    }
    base.update(kw)
    return StoreConfig(**base)


def message(i: int, topic: str = "TopicTest", queue_id: int = 0, size: int = 100, tags: str = "TagA") -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=(f"body-{i}-".encode() * (size // 8 + 1))[:size],
        properties={"TAGS": tags, "KEYS": f"key-{i}", "UNIQ_KEY": f"UNIQ{i:08d}"},
        born_timestamp=1_700_000_000_000 + i,
        born_host=("127.0.0.1", 40000),
    )


class RecordingSink:
    """A DispatchSink that keeps what it is handed: each appended record as a DispatchRequest, and the
    ends announced by `written` (for a CommitLog built without a store)."""

    def __init__(self) -> None:
        self.requests: list[DispatchRequest] = []
        self.written_to: list[int] = []

    def appended(
        self,
        key: tuple[str, int],
        phy: int,
        size: int,
        tags_code: int,
        store_ts: int,
        cq_offset: int,
        sys_flag: int,
        found: tuple[object, str | None, str | None],
        prepared_offset: int,
    ) -> None:
        self.requests.append(
            DispatchRequest(
                key[0], key[1], phy, size, tags_code, store_ts, cq_offset, found[1], found[2], sys_flag, prepared_offset
            )
        )

    def appended_run(
        self,
        key: tuple[str, int],
        offsets: list[int],
        sizes: list[int],
        tags_codes: list[int],
        store_ts: int,
        cq_offset: int,
        sys_flag: int,
        founds: list[tuple[object, str | None, str | None]],
    ) -> None:
        for i, phy in enumerate(offsets):
            self.appended(key, phy, sizes[i], tags_codes[i], store_ts, cq_offset + i, sys_flag, founds[i], 0)

    def written(self, end: int) -> None:
        self.written_to.append(end)


async def dispatched(store: MessageStore, timeout: float = 10.0) -> None:
    """Until the reput has passed every record on (it runs in the loop turns a real broker has between a
    send and a query); fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while store.dispatch_behind_bytes:
        if time.monotonic() >= deadline:
            raise AssertionError(f"dispatch is {store.dispatch_behind_bytes} bytes behind")
        await asyncio.sleep(0)  # a loop turn: the reput pass runs in it


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` every 20 ms until it holds (True) or `timeout` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def process_gone(pid: int) -> bool:
    """The process exited (a zombie not yet reaped by its parent counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
