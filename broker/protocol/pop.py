"""The strings POP puts on the wire: extraInfo (`POP_CK`), the offset-info headers, pop-retry topic names.

Pure functions, shared by the broker (broker.server.pop), the gRPC endpoint and the SDK's SimpleConsumer
(broker.client.pop). Fields are separated by one space; entries of the offset infos by `;` (RocketMQ's
ExtraInfoUtil formats, reference A.4).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ORDER_REVIVE_QID",
    "RETRY_FLAG_NORMAL",
    "RETRY_FLAG_V1",
    "RETRY_FLAG_V2",
    "ExtraInfo",
    "msg_offset_info",
    "normal_topic",
    "order_count_info",
    "parse_extra_info",
    "real_topic",
    "retry_flag",
    "retry_topic",
    "revive_topic",
    "start_offset_info",
]

#: The revive queue id that marks an orderly pop (no checkpoint is written for it).
ORDER_REVIVE_QID = 999
RETRY_FLAG_NORMAL = 0
RETRY_FLAG_V1 = 1
RETRY_FLAG_V2 = 2
_RETRY_PREFIX = "%RETRY%"


def revive_topic(cluster: str) -> str:
    """The topic of a cluster's pop checkpoints and acks, which every broker of the cluster makes itself."""
    return f"rmq_sys_REVIVE_LOG_{cluster}"


def retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """The pop-retry topic of a group and topic: `%RETRY%<group>_<topic>` (v1) or `%RETRY%<group>+<topic>` (v2)."""
    return f"{_RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_flag(topic: str, group: str) -> int:
    """0 for a normal topic, 1 or 2 for the group's v1 / v2 pop-retry topic."""
    if not topic.startswith(_RETRY_PREFIX + group):
        return RETRY_FLAG_NORMAL
    sep = topic[len(_RETRY_PREFIX) + len(group) : len(_RETRY_PREFIX) + len(group) + 1]
    if sep == "+":
        return RETRY_FLAG_V2
    if sep == "_":
        return RETRY_FLAG_V1
    return RETRY_FLAG_NORMAL


def normal_topic(topic: str, group: str) -> str:
    """The original topic of a pop-retry topic (the topic itself when it is not one)."""
    if retry_flag(topic, group) == RETRY_FLAG_NORMAL:
        return topic
    return topic[len(_RETRY_PREFIX) + len(group) + 1 :]


def real_topic(topic: str, group: str, flag: int) -> str:
    """The topic a handle's retry flag points at: the topic, or its v1 / v2 pop-retry topic."""
    if flag == RETRY_FLAG_V1:
        return retry_topic(group, topic)
    if flag == RETRY_FLAG_V2:
        return retry_topic(group, topic, v2=True)
    return topic


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """One message's handle: `ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId
    queueOffset`."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    flag: int
    broker_name: str
    queue_id: int
    queue_offset: int

    def __str__(self) -> str:
        return (
            f"{self.ck_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} {self.flag} "
            f"{self.broker_name} {self.queue_id} {self.queue_offset}"
        )

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID


def parse_extra_info(text: str | None) -> ExtraInfo:
    """The handle a client sends back; ValueError saying what is wrong. The 7-field form (no queueOffset)
    takes the CK offset for it; fields past the 8th (the proxy's commit-log offset) are ignored."""
    if not text:
        raise ValueError("extraInfo is empty")
    parts = text.split(" ")
    if len(parts) < 7:
        raise ValueError(f"extraInfo has {len(parts)} fields, 7 or 8 expected")
    try:
        nums = [int(parts[i]) for i in (0, 1, 2, 3, 4, 6)]
        queue_offset = int(parts[7]) if len(parts) > 7 else nums[0]
    except ValueError:
        raise ValueError("extraInfo has a field that is not a number") from None
    ck, pop_time, invisible, revive_qid, flag, queue_id = nums
    if flag not in (RETRY_FLAG_NORMAL, RETRY_FLAG_V1, RETRY_FLAG_V2):
        raise ValueError(f"extraInfo retry flag {flag} is not 0, 1 or 2")
    return ExtraInfo(ck, pop_time, invisible, revive_qid, flag, parts[5], queue_id, queue_offset)


def start_offset_info(entries: list[tuple[int, int, int]]) -> str:
    """`flag queueId startOffset` per queue read."""
    return ";".join(f"{flag} {qid} {start}" for flag, qid, start in entries)


def msg_offset_info(entries: list[tuple[int, int, list[int]]]) -> str:
    """`flag queueId off1,off2,...` per queue read."""
    return ";".join(f"{flag} {qid} {','.join(map(str, offs))}" for flag, qid, offs in entries)


def order_count_info(per_message: list[tuple[int, int, int, int]], per_queue: list[tuple[int, int, int]]) -> str:
    """`flag qo<queueId>%<offset> count` per message, then `flag queueId minCount` per queue."""
    parts = [f"{flag} qo{qid}%{off} {count}" for flag, qid, off, count in per_message]
    parts += [f"{flag} {qid} {count}" for flag, qid, count in per_queue]
    return ";".join(parts)
