"""Offsets of the `rocketmq` source: the JSON layout, resolving earliest/latest/JSON specs, the
per-trigger row cap and data-loss detection. Pure: no Spark, no I/O.

Used by options.py (parsing `startingOffsets` / `endingOffsets`), reader.py (batch planning) and
stream.py (the offsets Spark checkpoints). One layout serves every purpose:

    {"<topic>": {"<brokerName>/<queueId>": <next queue offset>, ...}, ...}

An offset is the queue offset of the next message to read (exclusive end of what was read), like a
Kafka offset. In user-given specs, -2 means the queue's earliest offset and -1 its latest. Spark
compares checkpointed offsets as JSON strings, so every dict we hand it is built in one stable order
(`sort_offsets`): topics by name, queues by (broker, numeric queue id).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from broker.client.message import MessageQueue

__all__ = [
    "EARLIEST",
    "LATEST",
    "Gap",
    "OffsetSpec",
    "Offsets",
    "cap_offsets",
    "find_gaps",
    "offsets_of",
    "parse_offset_spec",
    "parse_queue_key",
    "queue_key",
    "queues_of",
    "resolve_spec",
    "sort_offsets",
]

EARLIEST = -2
LATEST = -1

#: topic -> "broker/queueId" -> offset
Offsets = dict[str, dict[str, int]]
OffsetSpec = Literal["earliest", "latest"] | Offsets


def queue_key(broker: str, queue_id: int) -> str:
    return f"{broker}/{queue_id}"


def parse_queue_key(key: str) -> tuple[str, int]:
    """("broker-a", 3) from "broker-a/3"; the last slash separates, the id must be a number >= 0."""
    broker, sep, qid = key.rpartition("/")
    if not sep or not broker or not qid.isdigit():
        raise ValueError(f"queue key {key!r} is not <brokerName>/<queueId>")
    return broker, int(qid)


def _key_order(key: str) -> tuple[str, int]:
    return parse_queue_key(key)


def sort_offsets(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """A copy built in the stable order (equal offsets must serialise to equal JSON strings)."""
    return {
        topic: {key: int(offsets[topic][key]) for key in sorted(offsets[topic], key=_key_order)}
        for topic in sorted(offsets)
    }


def offsets_of(values: Mapping[MessageQueue, int]) -> Offsets:
    out: Offsets = {}
    for mq, offset in values.items():
        out.setdefault(mq.topic, {})[queue_key(mq.broker_name, mq.queue_id)] = int(offset)
    return sort_offsets(out)


def queues_of(offsets: Mapping[str, Mapping[str, int]]) -> dict[MessageQueue, int]:
    out: dict[MessageQueue, int] = {}
    for topic, queues in offsets.items():
        for key, offset in queues.items():
            broker, qid = parse_queue_key(key)
            out[MessageQueue(topic, broker, qid)] = int(offset)
    return out


def parse_offset_spec(
    raw: str | None, default: Literal["earliest", "latest"], topics: Iterable[str], name: str
) -> OffsetSpec:
    """`earliest`, `latest` or the JSON layout (values >= -2); ValueError names the option."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'{name} must be earliest, latest or JSON like {{"topic":{{"broker-a/0":12}}}}: {exc}'
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} JSON must be an object keyed by topic")
    known = set(topics)
    out: Offsets = {}
    for topic, queues in data.items():
        if topic not in known:
            raise ValueError(f"{name} names topic {topic!r}, which is not in option topic ({', '.join(sorted(known))})")
        if not isinstance(queues, dict):
            raise ValueError(f'{name}[{topic!r}] must be an object keyed by "<brokerName>/<queueId>"')
        for key, value in queues.items():
            try:
                parse_queue_key(key)
            except ValueError as exc:
                raise ValueError(f"{name}[{topic!r}]: {exc}") from None
            if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
                raise ValueError(f"{name}[{topic!r}][{key!r}] must be an offset >= 0, -2 (earliest) or -1 (latest)")
            out.setdefault(topic, {})[key] = value
    return sort_offsets(out)


def resolve_spec(
    spec: OffsetSpec,
    lows: Mapping[MessageQueue, int],
    highs: Mapping[MessageQueue, int],
    *,
    unlisted: int,
    name: str,
) -> dict[MessageQueue, int]:
    """Concrete offsets for every queue in `highs`. Queues a JSON spec does not list get `unlisted`
    (EARLIEST or LATEST); a JSON spec naming a queue the topic does not have is an error."""
    if spec == "earliest":
        return dict(lows)
    if spec == "latest":
        return dict(highs)
    assert isinstance(spec, dict)
    listed = queues_of(spec)
    missing = sorted(str(mq) for mq in set(listed) - set(highs))
    if missing:
        raise ValueError(f"{name} names queues that do not exist: {', '.join(missing)}")
    out = {}
    for mq in highs:
        value = listed.get(mq, unlisted)
        out[mq] = lows[mq] if value == EARLIEST else highs[mq] if value == LATEST else value
    return out


def cap_offsets(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """End offsets reading at most `max_rows` messages past `start`, shared across queues in
    proportion to their backlog (largest remainder, so the sum is exactly min(max_rows, backlog)
    and every queue with backlog eventually advances). Queues absent from `start` start at latest."""
    pending: list[tuple[str, str, int, int]] = []  # topic, key, start, backlog
    for topic, queues in latest.items():
        for key, high in queues.items():
            begin = start.get(topic, {}).get(key, high)
            pending.append((topic, key, begin, max(0, high - begin)))
    total = sum(p[3] for p in pending)
    if total <= max_rows:
        return sort_offsets(latest)
    shares: list[tuple[int, str, str, int, int]] = []  # -remainder, topic, key, begin, floor
    granted = 0
    for topic, key, begin, backlog in pending:
        whole, rem = divmod(max_rows * backlog, total)
        shares.append((-rem, topic, key, begin, whole))
        granted += whole
    leftover = max_rows - granted
    out: Offsets = {}
    # Largest remainders first; ties go to the first queues in the stable order.
    ranked = sorted(shares, key=lambda s: (s[0], s[1], _key_order(s[2])))
    for rank, (neg_rem, topic, key, begin, whole) in enumerate(ranked):
        extra = 1 if rank < leftover and neg_rem < 0 else 0
        out.setdefault(topic, {})[key] = begin + whole + extra
    return sort_offsets(out)


@dataclass(frozen=True, slots=True)
class Gap:
    """Offsets [start, low) of a queue that retention removed before they were read."""

    mq: MessageQueue
    start: int
    low: int

    def describe(self) -> str:
        return f"{self.mq}: offsets {self.start}..{self.low - 1} ({self.low - self.start} messages)"


def find_gaps(start: Mapping[MessageQueue, int], lows: Mapping[MessageQueue, int]) -> list[Gap]:
    """Queues whose next offset to read is below the broker's min offset: data lost to retention."""
    return sorted(
        (Gap(mq, begin, lows[mq]) for mq, begin in start.items() if mq in lows and begin < lows[mq]),
        key=lambda g: g.mq,
    )
