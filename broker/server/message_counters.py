"""Message counters for GET_BROKER_RUNTIME_INFO: totals today/yesterday and put/get TPS.

The send and pull processors call `put(n)` / `get(n)` (two integer additions: the hot path stays
cheap); `BrokerController` runs `sample()` once a second, and the admin processor reads
`tps()` and the day counters for the KVTable that `mqadmin clusterList` prints.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from datetime import datetime

__all__ = ["BrokerStats"]

log = logging.getLogger(__name__)

_WINDOWS = (10, 60, 600)  # seconds, the three numbers Java prints in putTps/getTransferredTps


class BrokerStats:
    __slots__ = (
        "_day",
        "_samples",
        "get_today_morning",
        "get_total",
        "get_yesterday_morning",
        "put_today_morning",
        "put_total",
        "put_yesterday_morning",
        "start_time",
    )

    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_today_morning = self.get_today_morning = 0
        self.put_yesterday_morning = self.get_yesterday_morning = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=max(_WINDOWS) + 1)
        self._day = datetime.now().date()
        self.start_time = int(time.time() * 1000)

    def put(self, n: int = 1) -> None:
        self.put_total += n

    def get(self, n: int = 1) -> None:
        self.get_total += n

    def sample(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._samples.append((now, self.put_total, self.get_total))
        today = datetime.now().date()
        if today != self._day:
            self._day = today
            self.put_yesterday_morning, self.get_yesterday_morning = self.put_today_morning, self.get_today_morning
            self.put_today_morning, self.get_today_morning = self.put_total, self.get_total

    def tps(self) -> tuple[str, str]:
        """('put10 put60 put600', 'get10 get60 get600') as Java formats them (2 decimals)."""
        puts, gets = [], []
        if not self._samples:
            return "0.00 0.00 0.00", "0.00 0.00 0.00"
        last_t, last_p, last_g = self._samples[-1]
        for window in _WINDOWS:
            first = self._samples[max(0, len(self._samples) - 1 - window)]
            span = last_t - first[0]
            puts.append((last_p - first[1]) / span if span > 0 else 0.0)
            gets.append((last_g - first[2]) / span if span > 0 else 0.0)
        return " ".join(f"{v:.2f}" for v in puts), " ".join(f"{v:.2f}" for v in gets)
