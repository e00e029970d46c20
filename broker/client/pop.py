"""POP on the client side: the replies of POP_MESSAGE turned into messages that carry their receipt handle.

A popped message's handle is its `POP_CK` property, RocketMQ's 8-field extraInfo (broker.protocol.pop). The
broker may send it already; otherwise it is built from the reply's `startOffsetInfo` and `msgOffsetInfo`
headers, as the Java client's `processPopResponse` does. Messages popped from the group's pop-retry topic
are shown under their original topic, and `receipt()` says which topic an ack must name.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.client.api import decode_pulled
from broker.client.message import MessageExt
from broker.protocol.command import RemotingCommand
from broker.protocol.pop import ExtraInfo, normal_topic, parse_extra_info, real_topic, retry_flag

__all__ = ["POP_CK", "Receipt", "parse_offset_info", "popped_messages", "receipt"]

POP_CK = "POP_CK"


@dataclass(frozen=True, slots=True)
class Receipt:
    """What an ack or a change of invisible time names: the real topic, the queue, the offset, the handle."""

    topic: str
    queue_id: int
    offset: int
    extra_info: str


def parse_offset_info(text: str | None) -> dict[str, list[int]]:
    """`flag queueId n1,n2;...` -> {"flag@queueId": [n1, n2, ...]}; ValueError on a malformed entry."""
    table: dict[str, list[int]] = {}
    for entry in (text or "").split(";"):
        if not entry:
            continue
        parts = entry.split(" ")
        if len(parts) != 3:
            raise ValueError(f"offset info entry {entry!r} has {len(parts)} fields, 3 expected")
        try:
            table[f"{int(parts[0])}@{int(parts[1])}"] = [int(n) for n in parts[2].split(",") if n]
        except ValueError:
            raise ValueError(f"offset info entry {entry!r} has a field that is not a number") from None
    return table


def popped_messages(response: RemotingCommand, broker_name: str, group: str) -> list[MessageExt]:
    """The messages of a POP_MESSAGE reply (code SUCCESS), each with its `POP_CK` handle and original topic."""
    fields = response.ext_fields
    messages = decode_pulled(response.body) if response.body else []
    starts = parse_offset_info(fields.get("startOffsetInfo"))
    pop_time, invisible_time, revive_qid = (int(fields[k]) for k in ("popTime", "invisibleTime", "reviveQid"))
    for msg in messages:
        flag = retry_flag(msg.topic, group)
        if POP_CK not in msg.properties:
            start = starts.get(f"{flag}@{msg.queue_id}")
            if start is None:
                raise ValueError(f"POP reply names no start offset for queue {msg.queue_id} of {msg.topic}")
            handle = ExtraInfo(
                start[0], pop_time, invisible_time, revive_qid, flag, broker_name, msg.queue_id, msg.queue_offset
            )
            msg.properties[POP_CK] = str(handle)
        msg.topic = normal_topic(msg.topic, group)
    return messages


def receipt(msg: MessageExt, group: str) -> Receipt:
    """The ack target of a popped message; ValueError when it carries no valid handle."""
    handle = parse_extra_info(msg.properties.get(POP_CK))
    return Receipt(real_topic(msg.topic, group, handle.flag), handle.queue_id, handle.queue_offset, str(handle))
