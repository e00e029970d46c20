"""UNIQ_KEY, the client-side message id (reference section 4.3): generation and parsing.

The broker's send processor calls `UniqKeyGenerator.next()` (or `new_uniq_key()`) for messages
that arrive without a UNIQ_KEY (ali-ons never sets one); our client sets it on every message;
admin code calls `parse_uniq_key()` / `uniq_key_time()` to find the time window of a
queryMsgById. Layout, hex upper-case: ip (4 or 16 bytes) | pid low 16 bits | an int32 per-process
constant (Java's classLoader hashCode) | int32 ms since the start of the current month, local
time | int16 counter. 32 characters for IPv4, 56 for IPv6.
"""

from __future__ import annotations

import calendar
import ipaddress
import itertools
import os
import random
import time
from dataclasses import dataclass

from broker.protocol.codes import ResponseCode
from broker.protocol.errors import ProtocolError

__all__ = [
    "InvalidUniqKey",
    "UniqKey",
    "UniqKeyGenerator",
    "month_start_ms",
    "new_uniq_key",
    "parse_uniq_key",
    "uniq_key_time",
]


class InvalidUniqKey(ProtocolError):
    """The string is not a 32- or 56-character hex UNIQ_KEY."""

    response_code = ResponseCode.SYSTEM_ERROR


def month_start_ms(now_ms: int) -> int:
    """Epoch ms of local midnight on the first day of the month containing `now_ms`."""
    t = time.localtime(now_ms / 1000)
    return int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)


def _next_month_start_ms(start_ms: int) -> int:
    t = time.localtime(start_ms / 1000)
    days = calendar.monthrange(t.tm_year, t.tm_mon)[1]
    # Land safely inside the next month, then snap to its first midnight (DST-proof).
    return month_start_ms(start_ms + (days + 1) * 86_400_000 - 43_200_000)


class UniqKeyGenerator:
    """Counter-based generator: the 20- or 44-character prefix is formatted once, so each key costs
    one clock read and one small format. Not thread-safe by design (one per event loop)."""

    __slots__ = ("_counter", "_month_end", "_month_start", "prefix")

    def __init__(self, ip: str = "127.0.0.1", pid: int | None = None, seed: int | None = None) -> None:
        packed = ipaddress.ip_address(ip).packed
        pid = os.getpid() if pid is None else pid
        # Java uses the classLoader's identity hash: any per-process constant does the same job.
        seed = random.getrandbits(32) if seed is None else seed & 0xFFFFFFFF
        self.prefix = f"{packed.hex().upper()}{pid & 0xFFFF:04X}{seed:08X}"
        self._counter = itertools.count(random.getrandbits(16))
        self._month_start = 0
        self._month_end = 0

    def next(self, now_ms: int | None = None) -> str:
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if not self._month_start <= now < self._month_end:
            self._month_start = month_start_ms(now)
            self._month_end = _next_month_start_ms(self._month_start)
        span = (now - self._month_start) & 0xFFFFFFFF
        return f"{self.prefix}{span:08X}{next(self._counter) & 0xFFFF:04X}"


_default: UniqKeyGenerator | None = None


def new_uniq_key() -> str:
    """A UNIQ_KEY from a process-wide generator with a loopback IP prefix."""
    global _default
    if _default is None:
        _default = UniqKeyGenerator()
    return _default.next()


@dataclass(frozen=True, slots=True)
class UniqKey:
    ip: str
    pid: int
    seed: int
    span_ms: int  # ms since the start of the month the key was made in
    counter: int


def parse_uniq_key(key: str) -> UniqKey:
    if len(key) not in (32, 56):
        raise InvalidUniqKey(f"UNIQ_KEY {key!r} has {len(key)} characters, expected 32 or 56")
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raise InvalidUniqKey(f"UNIQ_KEY {key!r} is not hex") from None
    ip_len = 4 if len(raw) == 16 else 16
    ip = str(ipaddress.ip_address(raw[:ip_len]))
    rest = raw[ip_len:]
    return UniqKey(
        ip=ip,
        pid=int.from_bytes(rest[0:2], "big"),
        seed=int.from_bytes(rest[2:6], "big"),
        span_ms=int.from_bytes(rest[6:10], "big"),
        counter=int.from_bytes(rest[10:12], "big"),
    )


def uniq_key_time(key: str, now_ms: int | None = None) -> int:
    """Approximate creation time (epoch ms), like Java's getNearlyTimeFromID: the span is taken
    from this month's start, or last month's when that would put it in the future."""
    span = parse_uniq_key(key).span_ms
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    start = month_start_ms(now)
    if start + span >= now:
        start = month_start_ms(start - 43_200_000)
    return start + span
