"""Timestamps on mqadmin's command line, in RocketMQ's two forms: milliseconds since the epoch, or
`yyyy-MM-dd#HH:mm:ss:SSS` in local time (what consumeMessage, printMsg, printMsgByQueue and
resetOffsetByTime accept)."""

from __future__ import annotations

import time
from datetime import datetime

__all__ = ["TIMESTAMP_HELP", "format_ms", "parse_reset_timestamp", "parse_timestamp"]

TIMESTAMP_HELP = "milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS (local time)"
_PATTERN = "%Y-%m-%d#%H:%M:%S:%f"


def parse_timestamp(text: str, flag: str = "timestamp") -> int:
    """Milliseconds from either form; ValueError naming the flag and the accepted forms otherwise."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.strptime(value, _PATTERN)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not {TIMESTAMP_HELP}") from None
    return int(parsed.timestamp() * 1000)


def parse_reset_timestamp(text: str, now_ms: int | None = None) -> int:
    """resetOffsetByTime's -s: "now" as well as the two forms."""
    if text.strip().lower() == "now":
        return int(time.time() * 1000) if now_ms is None else now_ms
    try:
        return parse_timestamp(text)
    except ValueError:
        raise ValueError(f"timestamp {text!r} is not 'now', {TIMESTAMP_HELP}") from None


def format_ms(ts: int) -> str:
    """RocketMQ's message dates (yyyy-MM-dd HH:mm:ss,SSS); "-" for no time."""
    return datetime.fromtimestamp(ts / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] if ts > 0 else "-"
