"""The records POP keeps in the revive topic: checkpoints (`ck`), acks (`ack`) and batch acks (`bAck`).

Each is a timer message on queue `reviveQid` of `rmq_sys_REVIVE_LOG_<cluster>`: a checkpoint due 1 s
before its messages become visible again, an ack when they do, so a reader of the revive queue meets a
checkpoint before its acks (reference A.6). Bodies are JSON with RocketMQ's short keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.properties import Prop
from broker.server.timer_message import park_for_timer
from broker.store.results import MessageToStore

__all__ = [
    "ACK_TAG",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "REVIVE_GROUP",
    "AckRecord",
    "CheckPoint",
    "decode_record_body",
    "revive_message",
]

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
#: The consumer group whose offsets on the revive queues are the revive service's progress.
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
#: A checkpoint is released this long before its messages are due, so it is read before their acks.
CK_LEAD_MS = 1000


@dataclass(slots=True)
class CheckPoint:
    """Messages of one queue handed out by one pop: offsets `start + d[i]`, invisible until popTime+invisibleTime."""

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str
    group: str
    broker_name: str
    diffs: list[int] = field(default_factory=list)
    revive_offset: int = 0
    re_put: int = 0

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> str:
        return f"{self.topic}{self.group}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "bm": 0,
            "n": len(self.diffs),
            "q": self.queue_id,
            "t": self.topic,
            "c": self.group,
            "ro": self.revive_offset,
            "d": self.diffs,
            "bn": self.broker_name,
            "rp": str(self.re_put),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckPoint:
        return cls(
            start_offset=int(d["so"]),
            pop_time=int(d["pt"]),
            invisible_time=int(d["it"]),
            queue_id=int(d["q"]),
            topic=str(d["t"]),
            group=str(d["c"]),
            broker_name=str(d.get("bn") or ""),
            diffs=[int(x) for x in d.get("d") or []],
            revive_offset=int(d.get("ro") or 0),
            re_put=int(d.get("rp") or 0),
        )


@dataclass(slots=True)
class AckRecord:
    """Acks of offsets (`ao`, or `aol` for a batch) of the checkpoint that starts at `so` with popTime `pt`."""

    offsets: list[int]
    start_offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    batch: bool = False

    @property
    def ck_key(self) -> str:
        return f"{self.topic}{self.group}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "ao": self.offsets[0],
            "so": self.start_offset,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time,
            "bn": self.broker_name,
        }
        if self.batch:
            d["aol"] = self.offsets
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], batch: bool) -> AckRecord:
        def get(short: str, long: str) -> Any:
            return d[short] if short in d else d[long]

        offsets = [int(x) for x in d["aol"]] if batch else [int(get("ao", "ackOffset"))]
        return cls(
            offsets=offsets,
            start_offset=int(get("so", "startOffset")),
            group=str(get("c", "consumerGroup")),
            topic=str(get("t", "topic")),
            queue_id=int(get("q", "queueId")),
            pop_time=int(get("pt", "popTime")),
            broker_name=str(d.get("bn") or d.get("brokerName") or ""),
            batch=batch,
        )


def revive_message(
    record: CheckPoint | AckRecord,
    *,
    revive_topic_name: str,
    revive_qid: int,
    deliver_ms: int,
    now_ms: int,
    store_host: tuple[str, int],
) -> MessageToStore:
    """The timer message that carries `record` to revive queue `revive_qid` at `deliver_ms`."""
    if isinstance(record, CheckPoint):
        tag = CK_TAG
        uniq = f"{record.topic}@{record.queue_id}@{record.start_offset}@{record.group}@{record.pop_time}@"
        uniq += f"{record.broker_name}@{CK_TAG}"
    else:
        tag = BATCH_ACK_TAG if record.batch else ACK_TAG
        uniq = f"{record.topic}@{record.queue_id}@{record.offsets[0]}@{record.group}@{record.pop_time}@"
        uniq += f"{record.broker_name}@{tag}"
    props = {Prop.TAGS: tag, Prop.UNIQ_KEY: uniq, "TIMER_DELIVER_MS": str(deliver_ms)}
    msg = MessageToStore(
        topic=revive_topic_name,
        queue_id=revive_qid,
        body=json.dumps(record.to_json(), separators=(",", ":")).encode(),
        properties=props,
        born_timestamp=now_ms,
        born_host=store_host,
    )
    if deliver_ms > now_ms:
        park_for_timer(msg, dict(props), deliver_ms)
    return msg


def decode_record_body(tag: str | None, body: bytes) -> CheckPoint | AckRecord | None:
    """A revive record read back; None for a tag or body this broker does not know (skipped, logged by the caller)."""
    try:
        data = json.loads(body)
        if tag == CK_TAG:
            return CheckPoint.from_json(data)
        if tag in (ACK_TAG, BATCH_ACK_TAG):
            return AckRecord.from_json(data, tag == BATCH_ACK_TAG)
    except (ValueError, KeyError, TypeError):
        return None
    return None
