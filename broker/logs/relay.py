"""The log lines of the broker's helper processes (the index helper), written by the broker itself.

Why not let a helper write the log file: two processes rotating one file lose lines (the standard
library's RotatingFileHandler is not multi-process safe), and a helper writing its own format on the
broker's stderr made the log mix two formats. So a helper started with `child_env()` writes one JSON
object per record on its stderr (`configure_child()`), and `Relay` in the broker reads that pipe and hands
each record to the broker's own handlers, with the helper's time, level, logger name and traceback: one
writer, one format, the rotated file included. A line that is not such an object (a crash of the helper
before its logging started) is relayed as a WARNING, as is.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from datetime import datetime
from typing import IO

from broker.logs.formats import JsonFormatter, TextFormatter

__all__ = ["RELAY_ENV", "Relay", "child_env", "configure_child"]

RELAY_ENV = "ROCKETCLUSTER_LOG_RELAY"
MAX_LINE = 1 << 20  # a longer line is cut: the relay must not hold an unbounded line in memory


def child_env() -> dict[str, str]:
    """Environment entries for a helper process whose stderr goes to a Relay."""
    return {RELAY_ENV: "1"}


def configure_child(level: int = logging.INFO) -> None:
    """In a helper process: JSON records on stderr for the broker's Relay, or text when run by hand."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if os.environ.get(RELAY_ENV) == "1" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def to_record(line: str, fallback_logger: str) -> logging.LogRecord:
    """A helper's stderr line as a LogRecord of this process."""
    try:
        entry = json.loads(line)
        created = datetime.fromisoformat(entry["time"]).timestamp()
        record = logging.makeLogRecord(
            {
                "name": str(entry["logger"]),
                "levelno": logging.getLevelName(str(entry["level"])),
                "levelname": str(entry["level"]),
                "msg": str(entry["message"]),
                "created": created,
                "msecs": (created - int(created)) * 1000,
                "exc_text": entry.get("exception"),
            }
        )
        if isinstance(record.levelno, int):
            return record
    except (ValueError, TypeError, KeyError):
        pass
    return logging.makeLogRecord(
        {"name": fallback_logger, "levelno": logging.WARNING, "levelname": "WARNING", "msg": line}
    )


class Relay:
    """A daemon thread that logs the records a helper writes on `stream` (its stderr), until EOF."""

    def __init__(self, stream: IO[bytes], logger: str) -> None:
        self.stream = stream
        self.logger = logger
        self.thread = threading.Thread(target=self._run, name=f"log-relay-{logger}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.stream:
            while True:
                raw = self.stream.readline(MAX_LINE)
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if line:
                    record = to_record(line, self.logger)
                    logging.getLogger(record.name).handle(record)
