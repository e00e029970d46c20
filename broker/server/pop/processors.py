"""The remoting handlers of POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, PEEK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION and POLLING_INFO: header in, PopService call, response out."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.errors import RequestError
from broker.server.pop.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from broker.server.pop.service import PopResult, PopService

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = ["PopProcessors", "bitset_positions"]

# Bodies past this are refused before parsing (a batch ack of thousands of entries is still far below).
MAX_BATCH_ACK_BODY = 4 * 1024 * 1024


def bitset_positions(raw: object) -> list[int]:
    """The set bits of a Java BitSet as fastjson writes `toByteArray()` (base64, little-endian) or as a list of
    byte values; ValueError for anything else."""
    if isinstance(raw, str):
        data = base64.b64decode(raw, validate=True)
    elif isinstance(raw, list) and all(isinstance(x, int) for x in raw):
        data = bytes(x & 0xFF for x in raw)
    else:
        raise ValueError("b is not a byte array")
    return [i * 8 + bit for i, byte in enumerate(data) for bit in range(8) if byte >> bit & 1]


def _pop_response(cmd: RemotingCommand, result: PopResult, *, peek: bool = False) -> RemotingCommand:
    ext = {
        "popTime": str(result.pop_time),
        "invisibleTime": str(result.invisible_time),
        "reviveQid": str(result.revive_qid),
        "restNum": str(result.rest_num),
    }
    if result.start_offset_info:
        ext["startOffsetInfo"] = result.start_offset_info
    if result.msg_offset_info:
        ext["msgOffsetInfo"] = result.msg_offset_info
    if result.order_count_info:
        ext["orderCountInfo"] = result.order_count_info
    if result.status == "FOUND":
        return cmd.response(ResponseCode.SUCCESS, "FOUND", ext, b"".join(m.record for m in result.messages))
    if peek:
        return cmd.response(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", ext)
    if result.status == "POLLING_FULL":
        return cmd.response(ResponseCode.POLLING_FULL, "POLLING_FULL", ext)
    return cmd.response(ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", ext)


class PopProcessors:
    def __init__(self, service: PopService) -> None:
        self.service = service

    async def pop(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        result = await self.service.pop(
            group=h.consumer_group,
            topic=h.topic,
            queue_id=h.queue_id,
            max_nums=h.max_msg_nums,
            invisible_ms=h.invisible_time,
            poll_ms=h.poll_time,
            init_mode=h.init_mode,
            exp_type=h.exp_type,
            exp=h.exp,
            order=h.order,
            attempt_id=h.attempt_id,
            born_ms=h.born_time or None,
        )
        return _pop_response(cmd, result)

    async def ack(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        await self.service.ack(
            group=h.consumer_group, topic=h.topic, queue_id=h.queue_id, offset=h.offset, extra_info=h.extra_info
        )
        return cmd.response(ResponseCode.SUCCESS)

    async def batch_ack(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        body = cmd.body or b""
        if len(body) > MAX_BATCH_ACK_BODY:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"batch ack body of {len(body)} bytes is too large")
        try:
            data: Any = json.loads(body) if body else {}
        except ValueError:
            raise RequestError(ResponseCode.INVALID_PARAMETER, "batch ack body is not JSON") from None
        if not isinstance(data, dict) or not isinstance(data.get("acks") or [], list):
            raise RequestError(ResponseCode.INVALID_PARAMETER, "batch ack body is not {brokerName, acks: [...]}")
        acks = []
        for entry in data.get("acks") or []:
            if not isinstance(entry, dict):
                raise RequestError(ResponseCode.INVALID_PARAMETER, "a batch ack entry is not an object")
            try:
                positions = bitset_positions(entry.get("b"))
            except ValueError as exc:
                raise RequestError(ResponseCode.INVALID_PARAMETER, f"batch ack entry: {exc}") from None
            acks.append({**entry, "b": positions})
        await self.service.batch_ack(str(data.get("brokerName") or self.service.config.broker_name), acks)
        return cmd.response(ResponseCode.SUCCESS)

    async def change_invisible(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext_fields(cmd.ext_fields)
        result = await self.service.change_invisible(
            group=h.consumer_group,
            topic=h.topic,
            queue_id=h.queue_id,
            offset=h.offset,
            extra_info=h.extra_info,
            invisible_ms=h.invisible_time,
        )
        ext = {
            "popTime": str(result.pop_time),
            "invisibleTime": str(result.invisible_time),
            "reviveQid": str(result.revive_qid),
        }
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    def peek(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = PeekMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        result = self.service.peek(group=h.consumer_group, topic=h.topic, queue_id=h.queue_id, max_nums=h.max_msg_nums)
        return _pop_response(cmd, result, peek=True)

    async def notification(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = NotificationRequestHeader.from_ext_fields(cmd.ext_fields)
        has_msg, full = await self.service.notification(
            group=h.consumer_group,
            topic=h.topic,
            queue_id=h.queue_id,
            poll_ms=h.poll_time,
            born_ms=h.born_time or None,
            order=h.order,
            attempt_id=h.attempt_id,
        )
        ext = {"hasMsg": "true" if has_msg else "false", "pollingFull": "true" if full else "false"}
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    def polling_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = PollingInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        num = self.service.polling_info(group=h.consumer_group, topic=h.topic, queue_id=h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"pollingNum": str(num)})
