"""Orderly pop state: per `topic@group` and queue, the batch last handed out and which of it is acked.

A queue is blocked while an unacked offset of its last batch is still invisible, except for a request that
repeats that batch's attemptId (a retry of a lost reply gets the same messages). Acks move the committed
offset to the first unacked offset of the batch (reference A.9). Kept in `config/consumerOrderInfo.json`
with RocketMQ's keys (`popTime`, `i`, `o` first offset then diffs, `ot`, `oc`, `cm`, `a`), written after
every change so a restart keeps queues blocked as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.server.persist import JsonFile

__all__ = ["OrderInfo", "OrderInfoManager"]


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int
    offsets: list[int]
    #: offset -> ms from which it is visible again (set by CHANGE_MESSAGE_INVISIBLETIME)
    next_visible: dict[int, int] = field(default_factory=dict)
    #: offset -> times it was handed out before this batch
    counts: dict[int, int] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    attempt_id: str | None = None

    def visible_at(self, offset: int) -> int:
        return self.next_visible.get(offset, self.pop_time + self.invisible_time)

    def blocking(self, now_ms: int) -> bool:
        return any(o not in self.acked and self.visible_at(o) > now_ms for o in self.offsets)

    def to_json(self) -> dict[str, Any]:
        first = self.offsets[0] if self.offsets else 0
        cm = 0
        for i, o in enumerate(self.offsets):
            if o in self.acked:
                cm |= 1 << i
        return {
            "popTime": self.pop_time,
            "i": self.invisible_time,
            "o": [first] + [o - first for o in self.offsets[1:]],
            "ot": {str(k): v for k, v in self.next_visible.items()},
            "oc": {str(k): v for k, v in self.counts.items()},
            "cm": cm,
            "a": self.attempt_id,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OrderInfo:
        raw = [int(x) for x in d.get("o") or []]
        offsets = [raw[0]] + [raw[0] + x for x in raw[1:]] if raw else []
        cm = int(d.get("cm") or 0)
        return cls(
            pop_time=int(d.get("popTime") or 0),
            invisible_time=int(d.get("i") or 0),
            offsets=offsets,
            next_visible={int(k): int(v) for k, v in (d.get("ot") or {}).items()},
            counts={int(k): int(v) for k, v in (d.get("oc") or {}).items()},
            acked={o for i, o in enumerate(offsets) if cm >> i & 1},
            attempt_id=d.get("a"),
        )


class OrderInfoManager:
    def __init__(self, config_dir: Path) -> None:
        self._file = JsonFile(config_dir / "consumerOrderInfo.json")
        self.table: dict[str, dict[int, OrderInfo]] = {}

    @staticmethod
    def _key(topic: str, group: str) -> str:
        return f"{topic}@{group}"

    def load(self) -> None:
        data = self._file.load()
        if not data:
            return
        for key, queues in (data.get("table") or {}).items():
            self.table[key] = {int(q): OrderInfo.from_json(info) for q, info in queues.items()}

    def persist(self) -> None:
        self._file.save(
            {"table": {k: {str(q): i.to_json() for q, i in qs.items()} for k, qs in self.table.items() if qs}}
        )

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self._key(topic, group), {}).get(queue_id)

    def check(self, topic: str, group: str, queue_id: int, attempt_id: str | None, now_ms: int) -> str:
        """One of "free" (read from the committed offset), "blocked", or "replay" (same attemptId: hand out the
        batch again)."""
        info = self.get(topic, group, queue_id)
        if info is None or not info.blocking(now_ms):
            return "free"
        if attempt_id and info.attempt_id == attempt_id:
            return "replay"
        return "blocked"

    def update(
        self,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
        attempt_id: str | None,
        *,
        replay: bool = False,
    ) -> dict[int, int]:
        """Record the batch just handed out; offset -> times it was handed out before (counts carried over).
        A replay (the same attemptId again) is the same delivery: its counts stay."""
        old = self.get(topic, group, queue_id)
        counts: dict[int, int] = {}
        for o in offsets:
            if old is None or o not in old.offsets:
                counts[o] = 0
            else:
                counts[o] = old.counts.get(o, 0) + (0 if replay else 1)
        self.table.setdefault(self._key(topic, group), {})[queue_id] = OrderInfo(
            pop_time, invisible_time, list(offsets), counts=counts, attempt_id=attempt_id
        )
        self.persist()
        return counts

    def ack(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int | None:
        """Mark `offset` acked; the offset to commit (first unacked, or past the batch), None when nothing moves
        (a stale handle). ValueError when the offset is not in the batch."""
        info = self.get(topic, group, queue_id)
        if info is None or offset not in info.offsets:
            raise ValueError(f"offset {offset} is not in the last orderly batch of queue {queue_id}")
        if info.pop_time != pop_time:
            return None
        info.acked.add(offset)
        self.persist()
        for o in info.offsets:
            if o not in info.acked:
                return o
        return info.offsets[-1] + 1

    def change_invisible(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, visible_at: int
    ) -> bool:
        info = self.get(topic, group, queue_id)
        if info is None or offset not in info.offsets or info.pop_time != pop_time:
            return False
        info.next_visible[offset] = visible_at
        self.persist()
        return True

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        self.table.get(self._key(topic, group), {}).pop(queue_id, None)
        self.persist()
