"""Messages each consumer group pulls from each topic, always counted (RocketMQ's GROUP_GET_NUMS and
GROUP_GET_SIZE stats items, and the consumer offset manager's pull offsets).

The pull processor calls `pulled` for every pull that returns messages: one dict lookup and three integer
additions, plus the queue's pulled-to offset. `BrokerController` calls `sample` once a second; it keeps a
snapshot of the counters every 10 s for the last minute, every minute for the last hour and every hour
for the last day, as BrokerStatsManager's StatsItem samples them. The admin processor reads `window` for
VIEW_BROKER_STATS_DATA (315) and the consume TPS of GET_CONSUME_STATS (208) / GET_BROKER_CONSUME_STATS
(317), and `pull_offset` for their pullOffset (how far a group has read, so #Inflight is real). In memory
only: like RocketMQ's, the counters start at zero when the broker starts.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["DAY", "HOUR", "MINUTE", "GroupGetStats", "stats_key"]

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# (seconds between snapshots, how many are kept) for each window
_RINGS = {MINUTE: (10.0, 8), HOUR: (60.0, 62), DAY: (3600.0, 26)}

Snapshot = tuple[float, dict[str, tuple[int, int, int]]]


def stats_key(topic: str, group: str) -> str:
    """BrokerStatsManager.buildStatsKey: `topic@group`."""
    return f"{topic}@{group}"


class GroupGetStats:
    __slots__ = ("_now", "_rings", "counts", "pulled_to")

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self.counts: dict[str, list[int]] = {}  # topic@group -> [messages, bytes, pulls]
        self.pulled_to: dict[tuple[str, str, int], int] = {}  # (group, topic, queue) -> next offset to pull
        start: Snapshot = (now(), {})
        self._rings = {span: deque([start], maxlen=keep) for span, (_, keep) in _RINGS.items()}

    def pulled(self, group: str, topic: str, queue_id: int, messages: int, nbytes: int, next_offset: int) -> None:
        key = f"{topic}@{group}"
        cell = self.counts.get(key)
        if cell is None:
            cell = self.counts[key] = [0, 0, 0]
        cell[0] += messages
        cell[1] += nbytes
        cell[2] += 1
        self.pulled_to[(group, topic, queue_id)] = next_offset

    def sample(self) -> None:
        now = self._now()
        frozen: dict[str, tuple[int, int, int]] | None = None
        for span, ring in self._rings.items():
            if now - ring[-1][0] >= _RINGS[span][0]:
                if frozen is None:
                    frozen = {k: (v[0], v[1], v[2]) for k, v in self.counts.items()}
                ring.append((now, frozen))

    def window(self, key: str, span: float) -> tuple[int, int, int, float]:
        """(messages, bytes, pulls, seconds covered) of `key` over the last `span` (MINUTE, HOUR or DAY):
        since the newest snapshot at least `span` old, or since the oldest one kept (the broker's start,
        while it is younger than `span`)."""
        now = self._now()
        ring = self._rings[span]
        base = ring[0]
        for snap in reversed(ring):
            if now - snap[0] >= span:
                base = snap
                break
        then = base[1].get(key, (0, 0, 0))
        cell = self.counts.get(key, [0, 0, 0])
        return cell[0] - then[0], cell[1] - then[1], cell[2] - then[2], now - base[0]

    def tps(self, topic: str, group: str) -> float:
        """Messages per second `group` pulled from `topic` over the last minute (the Consume TPS of 208)."""
        messages, _, _, seconds = self.window(stats_key(topic, group), MINUTE)
        return messages / seconds if seconds > 0 else 0.0

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The offset after the group's last pull that found messages on the queue; -1 when none since start."""
        return self.pulled_to.get((group, topic, queue_id), -1)
