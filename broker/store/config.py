"""StoreConfig: the store's settings, named as in RocketMQ's broker.conf (MessageStoreConfig keys).

Built by the broker's config loader (broker.conf property values arrive as strings; pydantic converts
them) and by tests; read by every store module. Unknown keys are rejected with a message naming them,
so a typo in broker.conf fails loudly instead of silently keeping a default.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_DELAY_LEVELS", "StoreConfig", "parse_delay_levels"]

log = logging.getLogger(__name__)

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
INDEX_HELPER_MIN_FILE_SIZE = 128 << 20  # CommitLog files this large or larger: see StoreConfig.index_helper
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> dict[int, int]:
    """messageDelayLevel ("1s 5s ... 2h") -> {level (1-based): delay in ms}."""
    levels: dict[int, int] = {}
    for i, token in enumerate(text.split(), start=1):
        unit = token[-1]
        if unit not in _UNIT_MS or not token[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: bad level {token!r} (expected a number and one of s/m/h/d)")
        levels[i] = int(token[:-1]) * _UNIT_MS[unit]
    return levels


def _f(default: Any, alias: str, *more: str) -> Any:
    return Field(default, validation_alias=AliasChoices(alias, *more), serialization_alias=alias)


class StoreConfig(BaseModel):
    """MessageStoreConfig. Field names are snake_case; the RocketMQ key is the alias (both accepted)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=False)

    store_path_root_dir: Path = _f(Path.home() / "store", "storePathRootDir")
    store_path_commit_log: Path | None = _f(None, "storePathCommitLog")
    store_path_consume_queue: Path | None = _f(None, "storePathConsumeQueue")
    store_path_index: Path | None = _f(None, "storePathIndex")
    mapped_file_size_commit_log: int = _f(1 << 30, "mappedFileSizeCommitLog")
    mapped_file_size_consume_queue: int = _f(300_000 * 20, "mappedFileSizeConsumeQueue")
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = _f("ASYNC_FLUSH", "flushDiskType")
    sync_flush_timeout: int = _f(5000, "syncFlushTimeout")
    flush_interval_commit_log: int = _f(500, "flushIntervalCommitLog")
    flush_commit_log_least_pages: int = _f(4, "flushCommitLogLeastPages")
    flush_commit_log_thorough_interval: int = _f(10_000, "flushCommitLogThoroughInterval")
    flush_interval_consume_queue: int = _f(1000, "flushIntervalConsumeQueue")
    flush_consume_queue_least_pages: int = _f(2, "flushConsumeQueueLeastPages")
    max_message_size: int = _f(4 * 1024 * 1024, "maxMessageSize")
    delete_when: str = _f("04", "deleteWhen")
    file_reserved_time: float = _f(72, "fileReservedTime")
    disk_max_used_space_ratio: int = _f(75, "diskMaxUsedSpaceRatio")
    disk_space_clean_forcibly_ratio: float = _f(0.85, "diskSpaceCleanForciblyRatio")
    clean_resource_interval: int = _f(10_000, "cleanResourceInterval")
    delete_commit_log_files_interval: int = _f(100, "deleteCommitLogFilesInterval")
    max_hash_slot_num: int = _f(5_000_000, "maxHashSlotNum")
    max_index_num: int = _f(20_000_000, "maxIndexNum")
    message_index_enable: bool = _f(True, "messageIndexEnable")
    message_index_safe: bool = _f(False, "messageIndexSafe")
    # Ours, not RocketMQ's. Unset: the index is written by a helper process (broker.store.index_process)
    # when the CommitLog files have a real broker's size; a small store (tests, tools) indexes in process.
    index_helper_enable: bool | None = _f(None, "indexHelperEnable")
    # Unset: zero-fill new CommitLog files only where it pays, on SYNC_FLUSH masters (group commit into
    # zero-filled files is ~40% faster); elsewhere it would only double the disk writes (see zero_fill).
    warm_mapped_file_enable: bool | None = _f(None, "warmMapedFileEnable", "warmMappedFileEnable")
    # Ours, not RocketMQ's: CommitLog disk space is reserved (fallocated, or zero-filled when warm) this many
    # bytes ahead of the writer, not whole files up front; disk used = data + at most this. 2 x
    # mappedFileSizeCommitLog reserves like RocketMQ (the file being written and the next, whole).
    commit_log_preallocate_ahead: int = _f(128 << 20, "commitLogPreallocateAhead")
    check_crc_on_recover: bool = _f(True, "checkCRCOnRecover")
    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = _f("ASYNC_MASTER", "brokerRole")
    message_delay_level: str = _f(DEFAULT_DELAY_LEVELS, "messageDelayLevel")
    max_transfer_bytes_on_message_in_memory: int = _f(256 * 1024, "maxTransferBytesOnMessageInMemory")
    max_transfer_count_on_message_in_memory: int = _f(32, "maxTransferCountOnMessageInMemory")

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known: set[str] = set()
            for name, info in cls.model_fields.items():
                known.add(name)
                alias = info.validation_alias
                if isinstance(alias, AliasChoices):
                    known.update(c for c in alias.choices if isinstance(c, str))
            unknown = sorted(k for k in data if k not in known)
            if unknown:
                raise ValueError(f"unknown store config keys: {', '.join(unknown)}")
        return data

    @model_validator(mode="after")
    def _check(self) -> StoreConfig:
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError("mappedFileSizeConsumeQueue must be a multiple of 20 (the unit size)")
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if self.commit_log_preallocate_ahead < 1 << 20:
            raise ValueError("commitLogPreallocateAhead must be at least 1048576 bytes (1 MiB)")
        if self.max_message_size <= 0:
            raise ValueError("maxMessageSize must be positive")
        parse_delay_levels(self.message_delay_level)
        self.delete_hours()
        return self

    # -- derived paths -------------------------------------------------------------------------------

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_commit_log or self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_consume_queue or self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_index or self.store_path_root_dir / "index"

    @property
    def config_dir(self) -> Path:
        return self.store_path_root_dir / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        return self.store_path_root_dir / "lock"

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    def zero_fill(self) -> bool:
        """Whether new CommitLog files are zero-filled and synced ahead of use (warmMapedFileEnable)."""
        if self.warm_mapped_file_enable is not None:
            return self.warm_mapped_file_enable
        return self.sync_flush and self.broker_role != "SLAVE"

    def index_helper(self) -> bool:
        """Whether a helper process writes the IndexFiles (indexHelperEnable, see index_process)."""
        if not self.message_index_enable:
            return False
        if self.index_helper_enable is not None:
            return self.index_helper_enable
        return self.mapped_file_size_commit_log >= INDEX_HELPER_MIN_FILE_SIZE

    def delay_levels(self) -> dict[int, int]:
        return parse_delay_levels(self.message_delay_level)

    def delete_hours(self) -> set[int]:
        """deleteWhen ("04" or "04;16") as a set of hours."""
        hours: set[int] = set()
        for part in self.delete_when.split(";"):
            part = part.strip()
            if not part.isdigit() or not 0 <= int(part) <= 23:
                raise ValueError(f"deleteWhen: {part!r} is not an hour 00-23")
            hours.add(int(part))
        return hours
