"""StoreConfig: the store's settings, named as in RocketMQ's broker.conf (MessageStoreConfig keys).

Built by the broker's config loader (`store_config()` in broker.server.config: broker.conf property values
arrive as strings; pydantic converts them) and by tests; read by every store module. The keys both the
broker and the store read (storePathRootDir, brokerRole, maxMessageSize...) are declared once, in
`BrokerStoreKeys`, which both `StoreConfig` and the broker's `BrokerConfig` extend: one type and one
check per key. `parse_delay_levels` is the one parser of messageDelayLevel.

Unknown keys given to the constructor (Python code: tests, tools) are rejected by name. A broker.conf
is read by the broker's loader instead, which warns about an unknown key and ignores it
(docs/configuration.md, "Unknown keys").
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_DELAY_LEVELS", "BrokerStoreKeys", "StoreConfig", "parse_delay_levels"]

log = logging.getLogger(__name__)

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
INDEX_HELPER_MIN_FILE_SIZE = 128 << 20  # CommitLog files this large or larger: see StoreConfig.index_helper
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> dict[int, int]:
    """messageDelayLevel ("1s 5s ... 2h") -> {level (1-based): delay in ms}; ValueError naming a bad token."""
    levels: dict[int, int] = {}
    for i, token in enumerate(text.split(), start=1):
        unit = token[-1]
        if unit not in _UNIT_MS or not token[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: bad level {token!r} (expected a number and one of s/m/h/d)")
        levels[i] = int(token[:-1]) * _UNIT_MS[unit]
    if not levels:
        raise ValueError("messageDelayLevel is empty")
    return levels


def _delete_hours(text: str) -> set[int]:
    hours: set[int] = set()
    for part in text.split(";"):
        part = part.strip()
        if not part.isdigit() or not 0 <= int(part) <= 23:
            raise ValueError(f"deleteWhen: {part!r} is not an hour 00-23")
        hours.add(int(part))
    return hours


def _default_store_root() -> Path:
    return Path.home() / "store"


def _f(default: Any, alias: str, *more: str) -> Any:
    return Field(default, validation_alias=AliasChoices(alias, *more), serialization_alias=alias)


class BrokerStoreKeys(BaseModel):
    """The broker.conf keys both the broker and the store read, declared once (types, defaults, checks).

    `BrokerConfig` (broker.server.config) and `StoreConfig` extend it; `store_config()` copies these
    fields from the broker's model into the store's, by name.
    """

    store_path_root_dir: Path = Field(default_factory=_default_store_root, alias="storePathRootDir")
    store_path_commit_log: Path | None = Field(None, alias="storePathCommitLog")
    mapped_file_size_commit_log: int = Field(1 << 30, alias="mappedFileSizeCommitLog", ge=4096)
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = Field("ASYNC_FLUSH", alias="flushDiskType")
    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = Field("ASYNC_MASTER", alias="brokerRole")
    delete_when: str = Field("04", alias="deleteWhen")
    file_reserved_time: int = Field(72, alias="fileReservedTime", ge=0)  # hours
    max_message_size: int = Field(4 * 1024 * 1024, alias="maxMessageSize", gt=0)
    message_delay_level: str = Field(DEFAULT_DELAY_LEVELS, alias="messageDelayLevel")
    max_transfer_bytes_on_message_in_memory: int = Field(256 * 1024, alias="maxTransferBytesOnMessageInMemory", gt=0)
    max_transfer_count_on_message_in_memory: int = Field(32, alias="maxTransferCountOnMessageInMemory", gt=0)

    @field_validator("message_delay_level")
    @classmethod
    def _check_delay(cls, value: str) -> str:
        parse_delay_levels(value)
        return value

    @field_validator("delete_when")
    @classmethod
    def _check_delete_when(cls, value: str) -> str:
        _delete_hours(value)
        return value

    def delay_levels(self) -> dict[int, int]:
        """{delay level (1-based): delay in ms} of messageDelayLevel."""
        return parse_delay_levels(self.message_delay_level)

    def delete_hours(self) -> set[int]:
        """deleteWhen ("04" or "04;16") as a set of hours."""
        return _delete_hours(self.delete_when)


class StoreConfig(BrokerStoreKeys):
    """MessageStoreConfig. Field names are snake_case; the RocketMQ key is the alias (both accepted)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=False)

    store_path_consume_queue: Path | None = _f(None, "storePathConsumeQueue")
    store_path_index: Path | None = _f(None, "storePathIndex")
    mapped_file_size_consume_queue: int = _f(300_000 * 20, "mappedFileSizeConsumeQueue")
    sync_flush_timeout: int = _f(5000, "syncFlushTimeout")
    flush_interval_commit_log: int = _f(500, "flushIntervalCommitLog")
    flush_commit_log_least_pages: int = _f(4, "flushCommitLogLeastPages")
    flush_commit_log_thorough_interval: int = _f(10_000, "flushCommitLogThoroughInterval")
    flush_interval_consume_queue: int = _f(1000, "flushIntervalConsumeQueue")
    flush_consume_queue_least_pages: int = _f(2, "flushConsumeQueueLeastPages")
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

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known: set[str] = set()
            for name, info in cls.model_fields.items():
                known.add(name)
                if info.alias:
                    known.add(info.alias)
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
        if self.commit_log_preallocate_ahead < 1 << 20:
            raise ValueError("commitLogPreallocateAhead must be at least 1048576 bytes (1 MiB)")
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
