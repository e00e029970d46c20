"""Rate-limited log lines: at most one line per key per interval, and a count of what was held back.

Used where one cause repeats per request or per connection (a client sending garbage, an index file that
cannot be created, a NameServer that is down): a flood of identical lines hides everything else and fills
the disk. The first line of a key is written; the ones that follow within `interval` seconds are counted,
and once the interval has passed the count is written as "... N similar lines suppressed" (by a timer on
the running event loop, or with the key's next line when there is no loop in this thread).

Keys name the cause (e.g. the exception type), not the peer, so that a thousand peers make one key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from broker.running_loop import running_loop

__all__ = ["DEFAULT_INTERVAL", "LimitedLog"]

DEFAULT_INTERVAL = 10.0
# Keys are causes, so a handful are live at once; the bound only stops a caller that keys by something
# unbounded (a peer address) from growing the table forever.
MAX_KEYS = 1024


class _Window:
    __slots__ = ("level", "opened", "suppressed")

    def __init__(self, opened: float, level: int) -> None:
        self.opened = opened
        self.level = level
        self.suppressed = 0  # held back and not reported yet


class LimitedLog:
    """One line per key per `interval` seconds on `logger`; the rest are counted and reported."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = DEFAULT_INTERVAL,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()  # the index service logs from worker threads as well

    def warning(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def error(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def info(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.INFO, key, msg, *args)

    def log(self, level: int, key: str, msg: str, *args: Any) -> bool:
        """Write the line unless this key already wrote one within the interval; True when written."""
        if not self.logger.isEnabledFor(level):
            return False
        now = self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window.opened < self.interval:
                window.suppressed += 1
                if window.suppressed == 1:
                    self._report_later(key, window)
                return False
            held_back = window.suppressed if window is not None else 0
            if window is None and len(self._windows) >= MAX_KEYS:
                self._windows.pop(next(iter(self._windows)))
            self._windows[key] = _Window(now, level)
        if held_back:
            msg += " (and %d similar lines suppressed in the %.0f s before)"
            args = (*args, held_back, self.interval)
        self.logger.log(level, msg, *args)
        return True

    def suppressed(self, key: str) -> int:
        """Lines of `key` held back in its current window and not yet reported."""
        with self._lock:
            window = self._windows.get(key)
            return window.suppressed if window is not None else 0

    def _report_later(self, key: str, window: _Window) -> None:
        loop = running_loop()
        if loop is None:
            return  # no loop in this thread: the key's next line carries the count
        delay = max(0.0, window.opened + self.interval - self.clock())
        loop.call_later(delay, self._report, key, window)

    def _report(self, key: str, window: _Window) -> None:
        with self._lock:
            count = window.suppressed
            if self._windows.get(key) is not window or not count:
                return  # a newer line of this key has written the count already
            window.suppressed = 0
        self.logger.log(window.level, "... %d similar lines suppressed in %.0f s [%s]", count, self.interval, key)
