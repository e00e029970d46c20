"""The two log formats every process of ours writes, the helpers included: text (the default) and JSON.

Text is one record per line *per line*: a record whose message or traceback spans several lines is written
as several lines, each with the record's own header and a "| " marker, so every line of a log parses with
`TEXT_LINE` and `grep ERROR` finds a traceback's every line. JSON is one object per record and line, for
log collectors (Fluent Bit, Vector, Loki's promtail): time, level, logger, message, and exception when
there is one.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime
from typing import Literal

__all__ = ["CONTINUATION", "TEXT_FORMAT", "TEXT_LINE", "JsonFormatter", "LogFormat", "TextFormatter", "formatter"]

LogFormat = Literal["text", "json"]

# The header of every text line: the format the CLI entry points always used (RocketMQ's logback pattern
# has the same parts: date, level, logger, message).
TEXT_FORMAT = "%(asctime)s %(levelname)-5s %(name)s - %(message)s"
CONTINUATION = "| "  # marks the second and later lines of one record
# Every text line, of any process of ours: time, level, logger, then the message (or "| " and a later line).
TEXT_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
    r"(?P<level>DEBUG|INFO |WARNING|ERROR|CRITICAL) "
    r"(?P<logger>\S+) - "
    r"(?P<message>.*)$"
)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if "\n" not in text:
            return text
        first, *rest = text.split("\n")
        # the header as it was written on the first line, repeated on each later one
        header = first[: len(first) - len(record.getMessage().split("\n", 1)[0])]
        return "\n".join([first, *(f"{header}{CONTINUATION}{line}" for line in rest)])


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str] = {
            # ISO 8601 with the UTC offset: collectors parse it without a configured pattern
            "time": datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:  # also set on records relayed from a helper process (broker.logs.relay)
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(kind: LogFormat) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else TextFormatter()
