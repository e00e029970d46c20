"""The logging keys of broker.conf and namesrv.properties, and what the servers read of them.

RocketMQ configures its logs in logback XML, not in broker.conf; its client reads them from system
properties (rocketmq.client.logRoot, logFileMaxSize, logFileMaxIndex). We take those names as config keys,
and RocketMQ's broker.log rolling policy as the defaults (128 MiB files, 10 of them kept: broker.log.1 to
broker.log.10). `logFormat` is ours. BrokerConfig (broker.server.config) and NamesrvConfig
(broker.namesrv.config) declare the fields with these types, so both refuse the same bad values with the
same message naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BeforeValidator, Field

from broker.logs.formats import LogFormat

__all__ = [
    "DEFAULT_MAX_INDEX",
    "DEFAULT_MAX_SIZE",
    "LogFileMaxIndex",
    "LogFileMaxSize",
    "LogFormatKey",
    "LogRoot",
    "LogSettings",
]

DEFAULT_MAX_SIZE = 128 * 1024 * 1024  # RocketMQ's broker.log SizeBasedTriggeringPolicy maxFileSize (128MB)
DEFAULT_MAX_INDEX = 10  # its FixedWindowRollingPolicy maxIndex
_FORMATS = ("text", "json")


def _check_format(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _FORMATS:
        return value.strip().lower()
    if isinstance(value, str):
        raise ValueError(f"unknown log format {value!r}: text (the default) or json (one JSON object a line)")
    return value  # the Literal check says what is wrong with a non-string


# A Literal (the operator's key table reads the accepted words from it), checked first for a clearer message.
LogFormatKey = Annotated[Literal["text", "json"], BeforeValidator(_check_format)]
# Empty: no log file, the console only (what a container wants: its runtime keeps stdout/stderr).
LogRoot = Annotated[str, Field(max_length=4096)]
# At least 1 KiB, so a typo in the unit does not rotate on every line; rotation needs at least one backup
# (the standard library's RotatingFileHandler never rotates with 0).
LogFileMaxSize = Annotated[int, Field(ge=1024)]
LogFileMaxIndex = Annotated[int, Field(ge=1, le=1000)]


class _HasLogKeys(Protocol):
    @property
    def log_format(self) -> str: ...
    @property
    def log_root(self) -> str: ...
    @property
    def log_file_max_size(self) -> int: ...
    @property
    def log_file_max_index(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LogSettings:
    """How one process logs: the format, and the rotated file under logRoot (None: the console only)."""

    format: LogFormat = "text"
    file: Path | None = None
    max_size: int = DEFAULT_MAX_SIZE
    backups: int = DEFAULT_MAX_INDEX

    @classmethod
    def of(cls, config: _HasLogKeys, file_name: str) -> LogSettings:
        fmt: LogFormat = "json" if config.log_format == "json" else "text"
        root = config.log_root.strip()
        return cls(
            format=fmt,
            file=Path(root).expanduser() / file_name if root else None,
            max_size=config.log_file_max_size,
            backups=config.log_file_max_index,
        )
