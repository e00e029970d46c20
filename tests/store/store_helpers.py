"""Helpers for store tests: a small-file StoreConfig and a running store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.store import MessageToStore, StoreConfig


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
