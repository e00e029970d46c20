"""A consumer's own pull and consume figures per topic, for the statusTable of GET_CONSUMER_RUNNING_INFO.

RocketMQ's client keeps them in ConsumerStatsManager (PULL_RT, PULL_TPS, CONSUME_RT, CONSUME_OK_TPS,
CONSUME_FAILED_TPS) and reports each as ConsumeStatus: per-pull and per-batch averages in milliseconds,
messages per second over the last minute, and failed messages in the last hour. Here each figure is a
running (value, times) pair with a snapshot every SAMPLE_SECONDS, taken lazily by the next add or read,
so recording costs two integer additions and a clock read per pull or consumed batch, never per message.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["SAMPLE_SECONDS", "ConsumerStats", "Rolling"]

SAMPLE_SECONDS = 10.0
_MINUTE, _HOUR = 60.0, 3600.0


class Rolling:
    """A running sum of values and how many were added, with an hour of snapshots to window them."""

    __slots__ = ("_now", "_snaps", "times", "value")

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self.value = 0.0
        self.times = 0
        # (time, value, times), oldest first; the first one is the zero point at creation
        self._snaps: deque[tuple[float, float, int]] = deque([(now(), 0.0, 0)])

    def add(self, value: float, times: int = 1) -> None:
        self.value += value
        self.times += times
        self._sample()

    def _sample(self) -> float:
        now = self._now()
        snaps = self._snaps
        if now - snaps[-1][0] >= SAMPLE_SECONDS:
            snaps.append((now, self.value, self.times))
            while len(snaps) > 2 and now - snaps[1][0] > _HOUR + SAMPLE_SECONDS:
                snaps.popleft()
        return now

    def window(self, seconds: float) -> tuple[float, int, float]:
        """(value added, times added, seconds covered) since the newest snapshot at least `seconds` old, or
        since creation when it is younger: the window is `seconds` to `seconds` + SAMPLE_SECONDS long."""
        now = self._sample()
        base = self._snaps[0]
        for snap in reversed(self._snaps):
            if now - snap[0] >= seconds:
                base = snap
                break
        return self.value - base[1], self.times - base[2], now - base[0]


class _TopicStats:
    __slots__ = ("consume_failed", "consume_ok", "consume_rt", "pull_rt", "pulled")

    def __init__(self, now: Callable[[], float]) -> None:
        self.pull_rt = Rolling(now)  # value: ms per pull
        self.pulled = Rolling(now)  # value: messages found
        self.consume_rt = Rolling(now)  # value: ms per listener call
        self.consume_ok = Rolling(now)  # value: messages
        self.consume_failed = Rolling(now)  # value: messages


def _avg(rolling: Rolling, seconds: float) -> float:
    value, times, _ = rolling.window(seconds)
    return value / times if times else 0.0


def _tps(rolling: Rolling, seconds: float) -> float:
    value, _, span = rolling.window(seconds)
    return value / span if span > 0 else 0.0


class ConsumerStats:
    """One consumer's figures by topic. All calls come from its event loop."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._topics: dict[str, _TopicStats] = {}

    def _of(self, topic: str) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats(self._now)
        return stats

    def pulled(self, topic: str, rt_seconds: float, found: int) -> None:
        """One pull answered after `rt_seconds` (a held long poll included, as Java counts it)."""
        stats = self._of(topic)
        stats.pull_rt.add(rt_seconds * 1000)
        if found:
            stats.pulled.add(found)

    def consumed(self, topic: str, rt_seconds: float, ok: int, failed: int) -> None:
        """One listener call over `ok + failed` messages."""
        stats = self._of(topic)
        stats.consume_rt.add(rt_seconds * 1000)
        if ok:
            stats.consume_ok.add(ok)
        if failed:
            stats.consume_failed.add(failed)

    def status(self, topic: str) -> dict[str, float | int]:
        """ConsumeStatus of `topic` as RocketMQ's ConsumerStatsManager.consumeStatus builds it: RTs are the
        last minute's averages (consumeRT falls back to the hour's), TPS the last minute's, and
        consumeFailedMsgs the failed messages of the last hour."""
        stats = self._topics.get(topic) or _TopicStats(self._now)
        consume_rt = _avg(stats.consume_rt, _MINUTE) or _avg(stats.consume_rt, _HOUR)
        return {
            "consumeFailedMsgs": int(stats.consume_failed.window(_HOUR)[0]),
            "consumeFailedTPS": _tps(stats.consume_failed, _MINUTE),
            "consumeOKTPS": _tps(stats.consume_ok, _MINUTE),
            "consumeRT": consume_rt,
            "pullRT": _avg(stats.pull_rt, _MINUTE),
            "pullTPS": _tps(stats.pulled, _MINUTE),
        }
